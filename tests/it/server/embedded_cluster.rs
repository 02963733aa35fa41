//! The embedded PostgreSQL cluster: create, start, stop, restart, crash leftovers, losing the
//! database while serving, and the `convrag serve` binary on embedded defaults.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{fixture, serve_command, ServeProcess};
use common::{shared_tempdir, Client};
use convrag::api;
use convrag::config::Config;
use convrag::store::{EmbeddedCluster, Store};
use convrag::web::AppState;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_starts_stops_restarts_and_survives_stale_locks() {
    let home = shared_tempdir();
    let cluster = EmbeddedCluster::new(&home.path().join("pgdata")).unwrap();
    assert!(!cluster.is_initialized());
    cluster.start().await.unwrap();
    assert!(cluster.is_running());
    // Listens on its own socket only: the socket file is in the data directory.
    assert!(home.path().join("pgdata/.s.PGSQL.5432").exists());

    let store = Store::connect(&cluster.target()).await.unwrap();
    store.create_user("alice").await.unwrap();
    store.close().await;
    cluster.stop().unwrap();
    assert!(!cluster.is_running());
    assert!(!home.path().join("pgdata/postmaster.pid").exists());

    // A stale postmaster.pid naming a live process that is not our server (PID reuse after a
    // crash) must not block the start.
    std::fs::write(
        home.path().join("pgdata/postmaster.pid"),
        format!(
            "{}\n{}\n",
            std::process::id(),
            home.path().join("pgdata").display()
        ),
    )
    .unwrap();
    cluster.start().await.unwrap();
    let store = Store::connect(&cluster.target()).await.unwrap();
    assert!(
        store.user_by_name("alice").await.unwrap().is_some(),
        "data survives a restart"
    );
    store.close().await;

    // A crash of the server itself: SIGKILL the postmaster, then start again.
    let pid: i32 = std::fs::read_to_string(home.path().join("pgdata/postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the orphaned backends notice their postmaster is gone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.start().await.unwrap();
    let store = Store::connect(&cluster.target()).await.unwrap();
    assert!(
        store.user_by_name("alice").await.unwrap().is_some(),
        "data survives a crash"
    );
    store.close().await;
    cluster.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_database_gives_503_and_the_server_recovers() {
    let home = shared_tempdir();
    let cluster = EmbeddedCluster::new(&home.path().join("pgdata")).unwrap();
    cluster.start().await.unwrap();
    let store = Store::connect(&cluster.target()).await.unwrap();
    let config = Config {
        home: home.path().to_path_buf(),
        admin_token: Some(common::ADMIN_TOKEN.into()),
        ..Config::default()
    };
    let server = api::spawn(AppState::new(
        store.clone(),
        config.into(),
        common::ADMIN_TOKEN,
    ))
    .unwrap();
    let anon = Client::new(&server, None);
    let alice = common::new_user(&anon, "alice").await;
    assert_eq!(
        alice
            .post("/v1/conversations", json!({"title": "kept"}))
            .await
            .status,
        201
    );

    cluster.stop().unwrap();
    let r = anon.get("/readyz").await;
    assert_eq!((r.status, r.code()), (503, "database_unavailable"));
    let r = alice.get("/v1/conversations").await;
    assert_eq!((r.status, r.code()), (503, "database_unavailable"));
    assert_eq!(
        anon.get("/healthz").await.status,
        200,
        "the process itself is still up"
    );

    cluster.start().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if anon.get("/readyz").await.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "server did not recover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = alice.get("/v1/conversations").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["conversations"][0]["title"], "kept");
    server.stop().await;
    store.close().await;
    cluster.stop().unwrap();
}

/// `convrag serve` as a user starts it: no DATABASE_URL, a fresh data directory.
fn spawn_serve(home: &std::path::Path) -> ServeProcess {
    ServeProcess::start(
        serve_command()
            .env_remove("DATABASE_URL")
            .env_remove("CONVRAG_ADMIN_TOKEN")
            .env("CONVRAG_HOME", home)
            .env("CONVRAG_BIND", "127.0.0.1:0")
            .stderr(Stdio::inherit()),
    )
}

/// Stops `server` with `signal`, which it must answer with a clean exit.
fn terminate(mut server: ServeProcess, signal: i32) {
    let status = server.terminate(signal);
    assert!(status.success(), "serve exited with {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_binary_runs_on_embedded_defaults_and_keeps_data_across_restarts() {
    let home = shared_tempdir();
    let server = spawn_serve(home.path());
    let url = server.url.clone();
    let admin_token = std::fs::read_to_string(home.path().join("admin_token")).unwrap();
    let http = reqwest::Client::new();
    let r: serde_json::Value = http
        .post(format!("{url}/v1/users"))
        .bearer_auth(admin_token.trim())
        .json(&json!({"name": "carol"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = r["token"].as_str().unwrap().to_string();
    let r = http
        .post(format!("{url}/v1/conversations"))
        .bearer_auth(&token)
        .json(&json!({"title": "trip", "ptkb": [{"text": "I am afraid of flying."}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    terminate(server, libc::SIGTERM);
    assert!(
        !home.path().join("pgdata/postmaster.pid").exists(),
        "the embedded cluster is stopped on shutdown"
    );

    let server = spawn_serve(home.path());
    let url = server.url.clone();
    let r: serde_json::Value = http
        .get(format!("{url}/v1/conversations"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["conversations"][0]["title"], "trip");
    assert_eq!(r["conversations"][0]["ptkb_count"], 1);
    terminate(server, libc::SIGINT);
    assert!(!home.path().join("pgdata/postmaster.pid").exists());
}

#[test]
fn unreachable_database_at_start_up_is_a_clear_error() {
    let home = shared_tempdir();
    let output = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .arg("serve")
        .env("CONVRAG_HOME", home.path())
        .env("DATABASE_URL", "postgres://postgres@127.0.0.1:1/nothing")
        .env("CONVRAG_BIND", "127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("error: cannot use the database at DATABASE_URL"),
        "{stderr}"
    );
}

#[test]
fn config_command_prints_the_effective_configuration() {
    let output = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .arg("config")
        .env("CONVRAG_BIND", "127.0.0.1:9999")
        .env("CONVRAG_ADMIN_TOKEN", "very-secret")
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("bind = \"127.0.0.1:9999\""), "{stdout}");
    assert!(!stdout.contains("very-secret"));
    assert!(stdout.contains("CONVRAG_HOME"));

    let output = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .arg("config")
        .env("CONVRAG_MAX_BODY_BYTES", "many")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("CONVRAG_MAX_BODY_BYTES"));
}

/// A `convrag serve` child that is stopped (SIGKILL) if the test fails before stopping it.
/// `convrag ARGS` on `home`, as a user runs it beside a server (embedded database, no model).
fn convrag_on(home: &std::path::Path, args: &[&str]) -> std::process::Output {
    let output = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("CONVRAG_CONFIG")
        .env_remove("CONVRAG_MODEL_DIR")
        .env_remove("CONVRAG_LLM_BASE_URL")
        .env("CONVRAG_HOME", home)
        .env("RUST_LOG", "warn")
        .current_dir(home)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "convrag {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

async fn ready(http: &reqwest::Client, url: &str) -> u16 {
    http.get(format!("{url}/readyz"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The processes `pgdata.users` lists as using the cluster.
fn cluster_users(home: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(home.join("pgdata.users"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("pid "))
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_beside_a_running_server_share_its_cluster_and_leave_it_running() {
    let home = shared_tempdir();
    let server = spawn_serve(home.path());
    let url = server.url.clone();
    let http = reqwest::Client::new();
    assert_eq!(ready(&http, &url).await, 200);
    assert_eq!(cluster_users(home.path()), [server.id()]);

    // `convrag user add` prints the token alone on one line; the server stays ready and
    // accepts the token.
    let out = convrag_on(home.path(), &["user", "add", "alice"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let token = stdout.trim().to_string();
    assert!(token.starts_with("cvr_"), "{stdout:?}");
    assert_eq!(ready(&http, &url).await, 200);
    let me = http
        .get(format!("{url}/v1/users/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
    let me: serde_json::Value = me.json().await.unwrap();
    assert_eq!(me["user"]["name"], "alice");
    assert_eq!(me["user"]["is_admin"], false);

    // A batch run on the same home adopts the cluster and leaves it running.
    let topics = fixture("ikat/topics_2023.json");
    convrag_on(
        home.path(),
        &[
            "run",
            "ikat",
            "--topics",
            topics.to_str().unwrap(),
            "--stages",
            "ptkb,rewrite",
            "--output",
            "ptkb.json",
            "--quiet",
        ],
    );
    assert!(home.path().join("ptkb.json").exists());
    assert_eq!(ready(&http, &url).await, 200);
    assert_eq!(cluster_users(home.path()), [server.id()]);

    // An administrator made on the command line; list; disable and enable while serving.
    let admin = convrag_on(home.path(), &["user", "add", "root", "--admin"]);
    let admin_token = String::from_utf8(admin.stdout).unwrap().trim().to_string();
    let list = String::from_utf8(convrag_on(home.path(), &["user", "list"]).stdout).unwrap();
    let rows: Vec<Vec<&str>> = list.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows[0], ["name", "id", "admin", "disabled", "created"]);
    // `me` is the first user a fresh server may create for its sign-in link (while no other
    // user exists, so whether it does depends on timing); it is not what this test is about.
    let names: Vec<(&str, &str, &str)> = rows[1..]
        .iter()
        .map(|r| (r[0], r[2], r[3]))
        .filter(|(name, _, _)| *name != "me")
        .collect();
    // `batch` is the batch run's user.
    assert_eq!(
        names,
        [
            ("alice", "no", "no"),
            ("batch", "no", "no"),
            ("root", "yes", "no")
        ]
    );
    convrag_on(home.path(), &["user", "disable", "alice"]);
    let r = http
        .get(format!("{url}/v1/conversations"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "user_disabled");
    let list = String::from_utf8(convrag_on(home.path(), &["user", "list"]).stdout).unwrap();
    let alice_row: Vec<&str> = list
        .lines()
        .find(|l| l.starts_with("alice\t"))
        .unwrap()
        .split('\t')
        .collect();
    assert_eq!(alice_row[0], "alice");
    assert_ne!(alice_row[3], "no", "{list}");
    // The administrator user enables alice again over HTTP.
    let alice_id = rows.iter().find(|r| r[0] == "alice").unwrap()[1];
    let r = http
        .post(format!("{url}/v1/users/{alice_id}/enable"))
        .bearer_auth(&admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{url}/v1/conversations"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // A failing command (no such user) exits non-zero and still leaves the server running.
    let failed = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(["user", "disable", "nobody"])
        .env_remove("DATABASE_URL")
        .env("CONVRAG_HOME", home.path())
        .output()
        .unwrap();
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("no user named \"nobody\""));
    assert_eq!(ready(&http, &url).await, 200);

    // The server is the last one out: it stops the cluster.
    terminate(server, libc::SIGTERM);
    assert!(!home.path().join("pgdata/postmaster.pid").exists());
    assert_eq!(cluster_users(home.path()), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_live_user_stops_the_cluster_and_dead_ones_are_ignored() {
    let home = shared_tempdir();
    // A command alone starts the cluster and, last out, stops it.
    let out = convrag_on(home.path(), &["user", "add", "bob"]);
    assert!(String::from_utf8(out.stdout).unwrap().starts_with("cvr_"));
    assert!(!home.path().join("pgdata/postmaster.pid").exists());

    let server = spawn_serve(home.path());
    let url = server.url.clone();
    let http = reqwest::Client::new();
    // Another live process still using the cluster (as a batch run would), and a dead one.
    let mut other = Command::new("sleep").arg("600").spawn().unwrap();
    let start_ticks = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        after.split_whitespace().nth(19).unwrap().to_string()
    };
    let users_file = home.path().join("pgdata.users");
    let mut text = std::fs::read_to_string(&users_file).unwrap();
    text.push_str(&format!("pid {} {}\n", other.id(), start_ticks(other.id())));
    // A pid that is alive but started at another time: a reused pid, not a user.
    text.push_str(&format!("pid {} 1\n", std::process::id()));
    std::fs::write(&users_file, text).unwrap();
    assert_eq!(ready(&http, &url).await, 200);

    // The server leaves first: the cluster keeps running for the other process.
    terminate(server, libc::SIGTERM);
    assert!(home.path().join("pgdata/postmaster.pid").exists());
    assert_eq!(cluster_users(home.path()), [other.id()]);

    // The other process dies without leaving; the next command is the last one out.
    other.kill().unwrap();
    other.wait().unwrap();
    let list = String::from_utf8(convrag_on(home.path(), &["user", "list"]).stdout).unwrap();
    assert!(list.contains("bob"), "{list}");
    assert!(!home.path().join("pgdata/postmaster.pid").exists());
    assert_eq!(cluster_users(home.path()), Vec::<u32>::new());
}
