//! A private PostgreSQL cluster under the data directory, so `convrag serve` needs no set-up.
//!
//! It uses the machine's server binaries (`initdb`, `pg_ctl`, `postgres`), listens only on a Unix
//! socket inside its own directory, and is stopped cleanly on shutdown. PostgreSQL refuses to run as
//! root, so when convrag runs as root the cluster is created and run as the `postgres` system user.

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{DbTarget, Store, StoreError, StoreOptions};
use crate::config::{redact_url, Config};

/// Errors of the embedded cluster.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error(
        "PostgreSQL server binaries not found (looked on PATH, in `pg_config --bindir` and under \
         /usr/lib/postgresql/*/bin); install them (Debian: apt-get install postgresql) or set DATABASE_URL"
    )]
    BinariesNotFound,
    #[error("running as root, but there is no unprivileged `postgres` user to run the cluster as; create one or set DATABASE_URL")]
    NoUnprivilegedUser,
    #[error("{path}: {message}")]
    Directory { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    DirectoryIo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        command: String,
        status: String,
        output: String,
    },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T, E = EmbeddedError> = std::result::Result<T, E>;

/// Database created inside the embedded cluster for convrag's tables.
pub const DATABASE_NAME: &str = "convrag";
const SUPERUSER: &str = "postgres";

/// A cluster in `data_dir`, socket in the same directory.
#[derive(Debug, Clone)]
pub struct EmbeddedCluster {
    data_dir: PathBuf,
    bin_dir: PathBuf,
    port: u16,
    run_as: Option<(u32, u32)>,
}

impl EmbeddedCluster {
    /// Prepares (but does not start) the cluster in `data_dir`.
    pub fn new(data_dir: &Path) -> Result<Self> {
        let bin_dir = find_bin_dir().ok_or(EmbeddedError::BinariesNotFound)?;
        // SAFETY: geteuid has no preconditions.
        let run_as = if unsafe { libc::geteuid() } == 0 {
            Some(lookup_user("postgres").ok_or(EmbeddedError::NoUnprivilegedUser)?)
        } else {
            None
        };
        let data_dir = absolute(data_dir)?;
        // The socket path must fit in sockaddr_un (108 bytes including the NUL).
        let socket_len = data_dir.join(".s.PGSQL.5432").as_os_str().len();
        if socket_len >= 107 {
            return Err(EmbeddedError::Directory {
                path: data_dir,
                message: format!(
                    "path too long for a Unix socket ({socket_len} bytes; at most 106): choose a shorter CONVRAG_HOME"
                ),
            });
        }
        Ok(Self {
            data_dir,
            bin_dir,
            port: 5432,
            run_as,
        })
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// How to connect to the running cluster.
    pub fn target(&self) -> DbTarget {
        DbTarget::Socket {
            socket_dir: self.data_dir.clone(),
            port: self.port,
            user: SUPERUSER.to_string(),
            database: DATABASE_NAME.to_string(),
        }
    }

    /// True once `initdb` has populated the directory.
    pub fn is_initialized(&self) -> bool {
        self.data_dir.join("PG_VERSION").exists()
    }

    /// Creates the cluster if needed, clears stale lock files left by a crash, and starts it
    /// (or adopts a server that is still running on this directory). Returns once it accepts
    /// connections and the convrag database exists.
    pub async fn start(&self) -> Result<()> {
        if !self.is_initialized() {
            self.init()?;
        }
        self.clear_stale_locks();
        if !self.is_running() {
            let log = self.data_dir.join("postgres.log");
            let options = format!(
                "-c listen_addresses='' -c unix_socket_directories='{}' -p {}",
                self.data_dir.display(),
                self.port
            );
            self.run_checked(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    self.data_dir.as_os_str(),
                    "-l".as_ref(),
                    log.as_os_str(),
                    "-o".as_ref(),
                    options.as_ref(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                    "start".as_ref(),
                ],
            )
            .map_err(|e| self.with_log_tail(e))?;
        }
        self.ensure_database().await
    }

    /// Stops the server (fast shutdown: open transactions are rolled back, data is safe).
    pub fn stop(&self) -> Result<()> {
        if !self.is_running() {
            return Ok(());
        }
        self.run_checked(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data_dir.as_os_str(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "stop".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// True when a postmaster is running on this data directory.
    pub fn is_running(&self) -> bool {
        self.live_postmaster_pid().is_some()
    }

    fn init(&self) -> Result<()> {
        std::fs::create_dir_all(&self.data_dir).map_err(|e| self.dir_io_error(e))?;
        std::fs::set_permissions(&self.data_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| self.dir_io_error(e))?;
        if let Some((uid, gid)) = self.run_as {
            chown(&self.data_dir, uid, gid).map_err(|e| self.dir_error(e))?;
            // Every parent must be traversable by the postgres user.
            let probe = Command::new("test")
                .arg("-w")
                .arg(&self.data_dir)
                .uid(uid)
                .gid(gid)
                .status();
            if !matches!(probe, Ok(s) if s.success()) {
                return Err(self.dir_error(
                    "the `postgres` user cannot reach this directory (a parent is not traversable, \
                     e.g. /root): choose another CONVRAG_HOME or set DATABASE_URL"
                        .to_string(),
                ));
            }
        }
        self.run_checked(
            "initdb",
            &[
                "-D".as_ref(),
                self.data_dir.as_os_str(),
                "-U".as_ref(),
                SUPERUSER.as_ref(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-locale".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// A crash can leave `postmaster.pid` (and the socket lock) behind. PostgreSQL itself only
    /// ignores them when the recorded PID is dead; after a reboot the PID may belong to another
    /// process, which would block the start. Remove them unless a postmaster of ours owns them.
    fn clear_stale_locks(&self) {
        let pid_file = self.data_dir.join("postmaster.pid");
        if pid_file.exists() && self.live_postmaster_pid().is_none() {
            tracing::warn!(path = %pid_file.display(), "removing stale postmaster.pid left by a crash");
            let _ = std::fs::remove_file(&pid_file);
        }
        let socket_lock = self.data_dir.join(format!(".s.PGSQL.{}.lock", self.port));
        if socket_lock.exists() && self.live_postmaster_pid().is_none() {
            let _ = std::fs::remove_file(&socket_lock);
            let _ = std::fs::remove_file(self.data_dir.join(format!(".s.PGSQL.{}", self.port)));
        }
    }

    /// The PID in postmaster.pid when that process is a postgres server for this directory.
    fn live_postmaster_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.data_dir.join("postmaster.pid")).ok()?;
        let mut lines = text.lines();
        let pid: i32 = lines.next()?.trim().parse().ok()?;
        let recorded_dir = lines.next()?.trim().to_string();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        let is_postgres = cmdline.contains("postgres") || cmdline.contains("postmaster");
        let same_dir = Path::new(&recorded_dir) == self.data_dir;
        (is_postgres && same_dir).then_some(pid)
    }

    async fn ensure_database(&self) -> Result<()> {
        use sqlx::postgres::PgConnectOptions;
        use sqlx::{ConnectOptions, Connection};
        let options = PgConnectOptions::new()
            .socket(&self.data_dir)
            .port(self.port)
            .username(SUPERUSER)
            .database("postgres");
        let to_err = |e: sqlx::Error| EmbeddedError::Command {
            command: "create database".to_string(),
            status: "error".to_string(),
            output: e.to_string(),
        };
        let mut conn = options.connect().await.map_err(to_err)?;
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                .bind(DATABASE_NAME)
                .fetch_one(&mut conn)
                .await
                .map_err(to_err)?;
        if !exists {
            sqlx::query(&format!("CREATE DATABASE {DATABASE_NAME}"))
                .execute(&mut conn)
                .await
                .map_err(to_err)?;
        }
        conn.close().await.map_err(to_err)?;
        Ok(())
    }

    fn run_checked(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<Output> {
        let path = self.bin_dir.join(program);
        let mut command = Command::new(&path);
        command.args(args);
        // A clean environment for the server: no inherited PG* settings pointing elsewhere.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PG") {
                command.env_remove(key);
            }
        }
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid).current_dir(&self.data_dir);
        }
        let output = command.output().map_err(|source| EmbeddedError::Spawn {
            program: path.clone(),
            source,
        })?;
        if !output.status.success() {
            let mut text = String::from_utf8_lossy(&output.stderr).trim().to_string();
            if text.is_empty() {
                text = String::from_utf8_lossy(&output.stdout).trim().to_string();
            }
            return Err(EmbeddedError::Command {
                command: format!(
                    "{} {}",
                    path.display(),
                    args.last().map(|a| a.to_string_lossy()).unwrap_or_default()
                ),
                status: output.status.to_string(),
                output: text,
            });
        }
        Ok(output)
    }

    fn with_log_tail(&self, e: EmbeddedError) -> EmbeddedError {
        let log = std::fs::read_to_string(self.data_dir.join("postgres.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(10).collect();
        match e {
            EmbeddedError::Command {
                command,
                status,
                output,
            } if !tail.is_empty() => EmbeddedError::Command {
                command,
                status,
                output: format!(
                    "{output}\nlast lines of postgres.log:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ),
            },
            other => other,
        }
    }

    fn dir_io_error(&self, source: std::io::Error) -> EmbeddedError {
        EmbeddedError::DirectoryIo {
            path: self.data_dir.clone(),
            source,
        }
    }

    fn dir_error(&self, message: String) -> EmbeddedError {
        EmbeddedError::Directory {
            path: self.data_dir.clone(),
            message,
        }
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .map_err(|e| EmbeddedError::Directory {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// Finds the directory holding initdb, pg_ctl and postgres.
fn find_bin_dir() -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    // On PATH (possibly as symlinks: resolve to the real directory, which pg_ctl needs too).
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                if let Ok(real) = std::fs::canonicalize(&initdb) {
                    if let Some(parent) = real.parent() {
                        if complete(parent) {
                            return Some(parent.to_path_buf());
                        }
                    }
                }
            }
        }
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        if out.status.success() {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if complete(&dir) {
                return Some(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: u32 = e.file_name().to_string_lossy().parse().ok()?;
            let bin = e.path().join("bin");
            complete(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer to static storage or NULL; we copy the ids out at once.
    let entry = unsafe { libc::getpwnam(c_name.as_ptr()) };
    if entry.is_null() {
        return None;
    }
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    (uid != 0).then_some((uid, gid))
}

fn chown(path: &Path, uid: u32, gid: u32) -> std::result::Result<(), String> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|e| format!("chown: {e}"))
}

/// Errors of opening or closing the database convrag talks to.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error("cannot use the database at DATABASE_URL ({url})")]
    External {
        /// The URL with its password masked.
        url: String,
        #[source]
        source: StoreError,
    },
    #[error(transparent)]
    Cluster(EmbeddedError),
    #[error("cannot start the embedded PostgreSQL cluster")]
    Start(#[source] EmbeddedError),
    #[error("cannot use the embedded PostgreSQL cluster")]
    Embedded(#[source] StoreError),
    #[error("cannot stop the embedded PostgreSQL cluster")]
    Stop(#[source] EmbeddedError),
}

/// The database convrag talks to, and the embedded cluster when it runs one.
pub struct Database {
    pub store: Store,
    pub cluster: Option<ClusterLease>,
}

impl Database {
    /// Connects to `DATABASE_URL`, or joins (starting it when needed) the embedded cluster that
    /// every convrag process on this home shares; the store migrates.
    pub async fn open(config: &Config) -> Result<Self, DatabaseError> {
        if let Some(url) = &config.database_url {
            let options = StoreOptions::from(&config.database);
            let store = Store::connect_with(&DbTarget::Url(url.clone()), options)
                .await
                .map_err(|source| DatabaseError::External {
                    url: redact_url(url),
                    source,
                })?;
            return Ok(Self {
                store,
                cluster: None,
            });
        }
        let cluster = EmbeddedCluster::new(&config.pgdata_dir()).map_err(DatabaseError::Cluster)?;
        tracing::info!(dir = %cluster.data_dir().display(), bin = %cluster.bin_dir().display(), "using the embedded PostgreSQL cluster");
        let lease = ClusterLease::acquire(cluster)
            .await
            .map_err(DatabaseError::Start)?;
        match Store::connect_with(
            &lease.cluster().target(),
            StoreOptions::from(&config.database),
        )
        .await
        {
            Ok(store) => Ok(Self {
                store,
                cluster: Some(lease),
            }),
            Err(e) => {
                let _ = lease.release();
                Err(DatabaseError::Embedded(e))
            }
        }
    }

    /// Closes connections and leaves the embedded cluster, stopping it when this was the last
    /// convrag process using it.
    pub async fn close(self) -> Result<(), DatabaseError> {
        self.store.close().await;
        if let Some(lease) = self.cluster {
            lease.release().map_err(DatabaseError::Stop)?;
        }
        Ok(())
    }
}

/// This process's registration as a user of a home's embedded cluster.
///
/// Every convrag process on a home (server, batch run, `convrag user ...`) shares one cluster.
/// Beside the data directory, `pgdata.users` lists the processes using it (pid and start time, so
/// a reused pid is not mistaken for a live user) and whether a convrag process started the
/// cluster; `pgdata.lock` is flock'd around every read-modify-write of that list and around the
/// start and the stop. The last live process to leave stops the cluster, and only when convrag
/// started it (a cluster someone started by hand is left running). Entries of dead processes are
/// ignored, so a crash never keeps the cluster from stopping later nor blocks anyone.
pub struct ClusterLease {
    cluster: EmbeddedCluster,
    me: ProcessId,
    released: bool,
}

/// A process, told apart from a later one with the same pid by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcessId {
    pid: u32,
    start_ticks: u64,
}

impl ProcessId {
    fn current() -> Option<Self> {
        Self::of(std::process::id())
    }

    fn of(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 22 (starttime) counts after the parenthesized command name, which may hold spaces.
        let after_name = &stat[stat.rfind(')')? + 1..];
        let start_ticks = after_name.split_whitespace().nth(19)?.parse().ok()?;
        Some(Self { pid, start_ticks })
    }

    fn is_alive(&self) -> bool {
        Self::of(self.pid) == Some(*self)
    }
}

/// The content of `pgdata.users`.
#[derive(Debug, Default, PartialEq)]
struct ClusterUsers {
    /// A convrag process started the running cluster (so the last one out stops it).
    started_by_convrag: bool,
    users: Vec<ProcessId>,
}

impl ClusterUsers {
    fn parse(text: &str) -> Self {
        let mut parsed = ClusterUsers::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("started_by_convrag"), Some(v), None) => parsed.started_by_convrag = v == "1",
                (Some("pid"), Some(pid), Some(start)) => {
                    if let (Ok(pid), Ok(start_ticks)) = (pid.parse(), start.parse()) {
                        parsed.users.push(ProcessId { pid, start_ticks });
                    }
                }
                _ => {}
            }
        }
        parsed
    }

    fn render(&self) -> String {
        let mut out = format!("started_by_convrag {}\n", u8::from(self.started_by_convrag));
        for p in &self.users {
            out.push_str(&format!("pid {} {}\n", p.pid, p.start_ticks));
        }
        out
    }
}

/// An exclusive flock on a file, released when dropped (or when the process dies).
struct FileLock {
    /// Held open: closing it releases the lock.
    _file: std::fs::File,
}

impl FileLock {
    fn acquire(path: &Path) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        loop {
            // SAFETY: flock on a file descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Self { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl ClusterLease {
    /// Registers this process as a user of the cluster, starting it when it is not running.
    pub async fn acquire(cluster: EmbeddedCluster) -> Result<Self> {
        let me = ProcessId::current().ok_or_else(|| {
            cluster.dir_error("cannot read this process's /proc entry".to_string())
        })?;
        if let Some(parent) = cluster.data_dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| cluster.dir_io_error(e))?;
        }
        let lock = cluster.lock_users()?;
        let mut users = cluster.read_users();
        users.users.retain(|p| p.is_alive() && *p != me);
        if !cluster.is_running() {
            users.started_by_convrag = true;
        } else if users.users.is_empty() && !cluster.users_path().exists() {
            // Running, and no convrag process ever registered: someone else's server.
            users.started_by_convrag = false;
        }
        // Start (or adopt, and make sure the database exists) while holding the lock, so a
        // process that is leaving cannot stop the cluster under us.
        cluster.start().await?;
        users.users.push(me);
        cluster.write_users(&users)?;
        drop(lock);
        Ok(Self {
            cluster,
            me,
            released: false,
        })
    }

    pub fn cluster(&self) -> &EmbeddedCluster {
        &self.cluster
    }

    /// Leaves the cluster; stops it when no other live convrag process uses it and convrag
    /// started it.
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.leave()
    }

    fn leave(&self) -> Result<()> {
        let _lock = self.cluster.lock_users()?;
        let mut users = self.cluster.read_users();
        users.users.retain(|p| p.is_alive() && *p != self.me);
        if users.users.is_empty() && users.started_by_convrag {
            tracing::info!("stopping the embedded PostgreSQL cluster (last convrag process)");
            self.cluster.stop()?;
            users.started_by_convrag = false;
        } else {
            tracing::info!(
                others = users.users.len(),
                "leaving the embedded PostgreSQL cluster running"
            );
        }
        self.cluster.write_users(&users)
    }
}

impl Drop for ClusterLease {
    /// A lease dropped without `release` (an early error, a panic) still leaves the cluster.
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.leave() {
                tracing::error!(error = %e, "cannot leave the embedded PostgreSQL cluster");
            }
        }
    }
}

impl EmbeddedCluster {
    fn users_path(&self) -> PathBuf {
        self.data_dir.with_extension("users")
    }

    fn lock_users(&self) -> Result<FileLock> {
        let path = self.data_dir.with_extension("lock");
        FileLock::acquire(&path).map_err(|e| EmbeddedError::Directory {
            path,
            message: e.to_string(),
        })
    }

    fn read_users(&self) -> ClusterUsers {
        std::fs::read_to_string(self.users_path())
            .map(|t| ClusterUsers::parse(&t))
            .unwrap_or_default()
    }

    fn write_users(&self, users: &ClusterUsers) -> Result<()> {
        let path = self.users_path();
        crate::formats::atomic::write_atomic(&path, users.render().as_bytes()).map_err(|e| {
            EmbeddedError::Directory {
                path,
                message: e.to_string(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_server_binaries_on_this_machine() {
        let dir =
            find_bin_dir().expect("PostgreSQL server binaries are installed by the README set-up");
        assert!(dir.join("pg_ctl").is_file());
    }

    #[test]
    fn too_long_socket_path_is_refused_with_the_path() {
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(120)));
        let err = EmbeddedCluster::new(&long).unwrap_err();
        assert!(err.to_string().contains("too long"), "{err}");
    }

    #[test]
    fn cluster_users_round_trip_and_tolerate_garbage() {
        let users = ClusterUsers {
            started_by_convrag: true,
            users: vec![
                ProcessId {
                    pid: 42,
                    start_ticks: 7,
                },
                ProcessId {
                    pid: 43,
                    start_ticks: 9,
                },
            ],
        };
        assert_eq!(ClusterUsers::parse(&users.render()), users);
        let parsed = ClusterUsers::parse("pid x 1\nnonsense\npid 5 6\n");
        assert!(!parsed.started_by_convrag);
        assert_eq!(
            parsed.users,
            [ProcessId {
                pid: 5,
                start_ticks: 6
            }]
        );
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = ProcessId::current().unwrap();
        assert!(me.is_alive());
        let reused = ProcessId {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!reused.is_alive());
    }

    #[test]
    fn garbage_pid_file_is_not_a_live_postmaster() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = EmbeddedCluster::new(dir.path()).unwrap();
        // PID 1 exists but is not a postgres for this directory.
        std::fs::write(dir.path().join("postmaster.pid"), "1\n/elsewhere\n").unwrap();
        assert!(cluster.live_postmaster_pid().is_none());
        cluster.clear_stale_locks();
        assert!(!dir.path().join("postmaster.pid").exists());
    }
}
