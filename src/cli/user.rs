//! `convrag user add|list|disable|enable`: user accounts without HTTP. They use the home's
//! database like the server does (joining its embedded cluster when it runs, leaving it running).

use anyhow::Context;
use clap::{Args, Subcommand};
use convrag::config::Config;
use convrag::store::embedded::Database;
use convrag::store::{NewToken, Store};

#[derive(Debug, Args)]
pub struct UserArgs {
    #[command(subcommand)]
    pub command: UserCommand,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user; prints the new user's token, alone on one line.
    Add {
        name: String,
        /// The user may create, disable and enable users.
        #[arg(long)]
        admin: bool,
        /// The token expires after this many seconds (default: never).
        #[arg(long, value_name = "SECONDS")]
        expires_in: Option<i64>,
    },
    /// List the users: name, id, admin, disabled, created (tab-separated, with a header).
    List,
    /// Disable a user: their tokens are refused from now on (their data is kept).
    Disable { name: String },
    /// Enable a disabled user again.
    Enable { name: String },
}

/// Runs `convrag user ...`.
pub fn run(config: &Config, args: UserArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        std::fs::create_dir_all(&config.home).with_context(|| {
            format!("cannot create the data directory {}", config.home.display())
        })?;
        let database = Database::open(config).await?;
        let result = command(&database.store, args.command).await;
        let closed = database.close().await;
        result?;
        Ok(closed?)
    })
}

async fn command(store: &Store, command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Add {
            name,
            admin,
            expires_in,
        } => {
            let token = NewToken {
                expires_in_seconds: expires_in,
                ..Default::default()
            };
            let (_, _, token) = store.create_user_with(&name, admin, &token, None).await?;
            println!("{token}");
        }
        UserCommand::List => {
            println!("name\tid\tadmin\tdisabled\tcreated");
            for user in store.list_users().await? {
                let disabled = user
                    .disabled_at
                    .map(|at| at.to_rfc3339())
                    .unwrap_or_else(|| "no".to_string());
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    user.name,
                    user.id,
                    if user.is_admin { "yes" } else { "no" },
                    disabled,
                    user.created_at.to_rfc3339()
                );
            }
        }
        UserCommand::Disable { name } => set_disabled(store, &name, true).await?,
        UserCommand::Enable { name } => set_disabled(store, &name, false).await?,
    }
    Ok(())
}

async fn set_disabled(store: &Store, name: &str, disabled: bool) -> anyhow::Result<()> {
    let user = store
        .user_by_name(name)
        .await?
        .with_context(|| format!("no user named {name:?}"))?;
    store.set_user_disabled(user.id, disabled).await?;
    eprintln!(
        "user {name:?} {}",
        if disabled { "disabled" } else { "enabled" }
    );
    Ok(())
}
