//! A private PgBouncer (the Debian package, `apt-get install pgbouncer`; scripts/test.sh
//! installs it) in transaction pooling mode, on a free loopback port with its own ini in a temp
//! directory, in front of the test database on the machine's PostgreSQL.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;

use crate::common;

const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

pub struct PgBouncer {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl PgBouncer {
    /// PgBouncer for the databases of the machine's PostgreSQL with `pool_size` server
    /// connections per database, resetting each server connection after every transaction as
    /// docs/deploy.md prescribes.
    pub fn start(pool_size: u32) -> PgBouncer {
        assert!(
            std::path::Path::new(PGBOUNCER).exists(),
            "{PGBOUNCER} is missing: apt-get install pgbouncer (scripts/test.sh does)"
        );
        let admin: PgConnectOptions = common::admin_url().parse().unwrap();
        let host = admin.get_host().to_string();
        let pg_port = admin.get_port();
        let user = admin.get_username().to_string();
        let dir = common::shared_tempdir();
        let port = free_port();
        let ini = dir.path().join("pgbouncer.ini");
        let users = dir.path().join("users.txt");
        std::fs::write(&users, format!("\"{user}\" \"\"\n")).unwrap();
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={pg_port} user={user}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {}\npool_mode = transaction\n\
                 default_pool_size = {pool_size}\nmax_client_conn = 200\n\
                 server_reset_query = DEALLOCATE ALL\nserver_reset_query_always = 1\n\
                 ignore_startup_parameters = extra_float_digits\n",
                users.display()
            ),
        )
        .unwrap();
        for f in [&ini, &users] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // PgBouncer refuses to run as root.
        let mut cmd = Command::new(PGBOUNCER);
        if running_as_root() {
            cmd.args(["-u", "nobody"]);
        }
        let mut child = cmd
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("pgbouncer exited ({status}):\n{err}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "pgbouncer did not listen within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        PgBouncer {
            child,
            port,
            _dir: dir,
        }
    }

    /// A URL of `database` through this PgBouncer (`?pgbouncer=true` when `flag`).
    pub fn url(&self, database: &str, flag: bool) -> String {
        let admin: PgConnectOptions = common::admin_url().parse().unwrap();
        let user = admin.get_username();
        let query = if flag { "?pgbouncer=true" } else { "" };
        format!(
            "postgres://{user}@127.0.0.1:{}/{database}{query}",
            self.port
        )
    }
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
                .unwrap_or(false)
        })
        .unwrap_or(false)
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
