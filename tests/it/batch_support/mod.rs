//! Shared set-up of the batch-run tests: the `convrag` binary with a private data directory and a
//! database of its own, fixture collections indexed by `convrag index`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

pub use common::TestDb;

/// A data directory and a database for `convrag` runs.
pub struct Env {
    pub db: TestDb,
    pub home: tempfile::TempDir,
    /// Use the installed reranking model (else the data directory has none: BM25 order only).
    pub model: bool,
}

impl Env {
    pub async fn new(model: bool) -> Env {
        Env {
            db: TestDb::new().await,
            home: tempfile::tempdir().unwrap(),
            model,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }

    /// `convrag` with only this environment's settings (nothing inherited that changes results).
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_convrag"));
        for var in [
            "CONVRAG_CONFIG",
            "CONVRAG_MODEL_DIR",
            "ORT_DYLIB_PATH",
            "CONVRAG_LLM_BASE_URL",
            "CONVRAG_LLM_MODEL",
            "CONVRAG_LLM_API_KEY",
            "DATABASE_URL",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("CONVRAG_HOME", self.home.path())
            .env("DATABASE_URL", &self.db.url)
            .env("RUST_LOG", "warn")
            .current_dir(self.home.path());
        if self.model {
            let dir = common::model_dir("all-MiniLM-L6-v2");
            let lib = common::ort_library();
            cmd.env("CONVRAG_MODEL_DIR", dir).env("ORT_DYLIB_PATH", lib);
        }
        cmd
    }

    /// Runs `convrag ARGS`; returns the output whatever the exit status.
    pub fn convrag(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs `convrag ARGS` and fails the test unless it succeeds.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.convrag(args);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "convrag {args:?} failed:\n{stderr}");
        stderr
    }

    /// Runs `convrag ARGS`, expects failure, returns standard error.
    pub fn fails(&self, args: &[&str]) -> String {
        let o = self.convrag(args);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            !o.status.success(),
            "convrag {args:?} should fail:\n{stderr}"
        );
        stderr
    }

    /// Indexes `file` as collection `name`.
    pub fn index(&self, name: &str, format: &str, file: &Path, language: Option<&str>) {
        let file = file.to_str().unwrap();
        let mut args = vec!["index", "--collection", name, "--format", format];
        if let Some(l) = language {
            args.extend(["--language", l]);
        }
        args.push(file);
        self.ok(&args);
    }

    /// Indexes `file` as collection `name` without its passage vectors: a BM25 run's reranker
    /// then encodes only the passages it reranks.
    pub fn index_without_vectors(&self, name: &str, format: &str, file: &Path) {
        let file = file.to_str().unwrap();
        self.ok(&[
            "index",
            "--collection",
            name,
            "--format",
            format,
            "--no-vectors",
            file,
        ]);
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name))
            .unwrap_or_else(|e| panic!("{}: {e}", self.path(name).display()))
    }

    /// Current turns stored for the run's conversations.
    pub async fn stored_turns(&self, run_name: &str) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM turns t JOIN conversations c ON c.id = t.conversation_id \
             WHERE t.is_current AND c.external_id LIKE $1 || '/%'",
        )
        .bind(run_name)
        .fetch_one(self.db.store.pool())
        .await
        .unwrap()
    }
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
