//! Effective configuration: built-in defaults, then an optional `convrag.toml`, then environment
//! variables, then command-line flags (each layer overrides the one before).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Errors while assembling the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid configuration file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value for {name}: {message}")]
    Invalid { name: &'static str, message: String },
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Settings of the OpenAI-compatible chat endpoint used by the generator and the LLM rewriter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// Base URL such as `http://127.0.0.1:8000/v1`; `None` means no LLM (extractive answers).
    pub base_url: Option<String>,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout_secs: u64,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            model: "default".to_string(),
            api_key: None,
            timeout_secs: 60,
        }
    }
}

/// Connection pools, the turn lease and idempotency records (`[database]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// Connections of the main pool (turns, conversations, PTKB).
    pub pool_size: u32,
    /// Connections kept apart for token lookups, so busy turns never starve authentication.
    pub auth_pool_size: u32,
    /// How long a request waits for a pooled connection before answering 503.
    pub acquire_timeout_ms: u64,
    /// Lifetime of a turn's lease on its conversation; renewed while the turn runs, so a
    /// crashed holder blocks the conversation for at most this long.
    pub turn_lease_secs: u64,
    /// How long a turn waits for another turn of the same conversation before 409.
    pub turn_wait_secs: u64,
    /// How long the result of a request with an `Idempotency-Key` is kept.
    pub idempotency_hours: u64,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            pool_size: 16,
            auth_pool_size: 4,
            acquire_timeout_ms: 3000,
            turn_lease_secs: 30,
            turn_wait_secs: 120,
            idempotency_hours: 24,
        }
    }
}

/// Limits on what users upload into their private collections (`[uploads]`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct UploadLimits {
    /// Largest accepted file, in bytes.
    pub max_file_bytes: u64,
    /// Most files in one upload request.
    pub max_files: usize,
    /// Most documents one private collection holds.
    pub max_documents: u32,
    /// Most uploaded bytes one private collection holds.
    pub max_collection_bytes: u64,
    /// Most private collections one user has.
    pub max_collections: u32,
    /// Seconds an upload's body may send nothing before it is refused (408).
    pub body_idle_secs: u64,
    /// Seconds an upload's whole body may take at least (408 beyond its deadline).
    pub deadline_secs: u64,
    /// Bytes per second an upload's declared length is given beyond `deadline_secs`: the
    /// deadline is the larger of the two.
    pub min_bytes_per_sec: u64,
}

impl UploadLimits {
    /// `max_files` unless configured.
    pub const DEFAULT_MAX_FILES: usize = 20;

    fn load_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        fn number<T: std::str::FromStr>(
            env: &dyn Fn(&str) -> Option<String>,
            name: &'static str,
            into: &mut T,
        ) -> Result<()> {
            if let Some(v) = env(name) {
                *into = v.trim().parse().map_err(|_| ConfigError::Invalid {
                    name,
                    message: format!("expected a whole number, got {v:?}"),
                })?;
            }
            Ok(())
        }
        number(
            env,
            "CONVRAG_UPLOAD_MAX_FILE_BYTES",
            &mut self.max_file_bytes,
        )?;
        number(env, "CONVRAG_UPLOAD_MAX_FILES", &mut self.max_files)?;
        number(env, "CONVRAG_UPLOAD_MAX_DOCUMENTS", &mut self.max_documents)?;
        number(
            env,
            "CONVRAG_UPLOAD_MAX_COLLECTION_BYTES",
            &mut self.max_collection_bytes,
        )?;
        number(
            env,
            "CONVRAG_UPLOAD_MAX_COLLECTIONS",
            &mut self.max_collections,
        )?;
        number(
            env,
            "CONVRAG_UPLOAD_BODY_IDLE_SECS",
            &mut self.body_idle_secs,
        )?;
        number(env, "CONVRAG_UPLOAD_DEADLINE_SECS", &mut self.deadline_secs)?;
        number(
            env,
            "CONVRAG_UPLOAD_MIN_BYTES_PER_SEC",
            &mut self.min_bytes_per_sec,
        )?;
        let at_least_one = [
            ("CONVRAG_UPLOAD_BODY_IDLE_SECS", self.body_idle_secs),
            ("CONVRAG_UPLOAD_DEADLINE_SECS", self.deadline_secs),
            ("CONVRAG_UPLOAD_MIN_BYTES_PER_SEC", self.min_bytes_per_sec),
        ];
        for (name, value) in at_least_one {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    name,
                    message: "must be at least 1".to_string(),
                });
            }
        }
        Ok(())
    }

    /// How long an upload declaring `declared_bytes` may take in all: `deadline_secs`, or longer
    /// for a body that needs it at `min_bytes_per_sec` (an undeclared length gets the floor).
    pub fn deadline(&self, declared_bytes: Option<u64>) -> std::time::Duration {
        let at_rate = declared_bytes.unwrap_or(0) / self.min_bytes_per_sec.max(1);
        std::time::Duration::from_secs(self.deadline_secs.max(at_rate))
    }
}

impl Default for UploadLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 10 << 20,
            max_files: Self::DEFAULT_MAX_FILES,
            max_documents: 200,
            max_collection_bytes: 50 << 20,
            max_collections: 10,
            body_idle_secs: 30,
            deadline_secs: 60,
            min_bytes_per_sec: 64 << 10,
        }
    }
}

/// Dense retrieval over a collection's passage vectors (`[dense]`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct DenseConfig {
    /// Passages from which a collection's complete vectors get an HNSW graph (`hnsw_rs`, built
    /// beside the vector file) that dense search uses instead of the exact scan. Below it the
    /// exact scan is fast enough and its answer is the exact one: 41 ms at 105k vectors and about
    /// 80 ms at 200k on 2 vCPUs, while the graph costs about a second per 1,000 vectors to build
    /// and 3.7 KiB per vector of memory (BENCHMARKS.md, "Approximate search").
    pub ann_min_vectors: u64,
}

impl DenseConfig {
    /// `ann_min_vectors` unless configured.
    pub const DEFAULT_ANN_MIN_VECTORS: u64 = 200_000;
}

impl Default for DenseConfig {
    fn default() -> Self {
        Self {
            ann_min_vectors: Self::DEFAULT_ANN_MIN_VECTORS,
        }
    }
}

/// What one user may store and ask for. Lengths are in characters; a rate of 0 is unlimited.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// PTKB statements visible at once in a conversation (and statements in a user's profile,
    /// which every new conversation's PTKB takes).
    pub statements_per_conversation: usize,
    /// Conversations one user may keep.
    pub conversations_per_user: usize,
    /// Longest utterance of a turn (at most 10000, the database's bound).
    pub utterance_chars: usize,
    /// Longest PTKB or profile statement (at most 2000, the database's bound).
    pub statement_chars: usize,
    /// Most messages one chat request may carry (its imported history included).
    pub chat_messages: usize,
    /// Longest message of a chat request, whatever its role (a user message is an utterance, so
    /// `utterance_chars` bounds it too).
    pub message_chars: usize,
    /// Turns (HTTP, OpenAI chat, MCP `ask`) one user may start per minute.
    pub turns_per_minute: u32,
    /// Collection searches (HTTP, MCP `search`) one user may run per minute.
    pub searches_per_minute: u32,
    /// Largest qrels text one `PUT /v1/qrels/{name}` stores (413 beyond).
    pub qrels_bytes: usize,
    /// Qrels one user keeps (429 beyond).
    pub qrels_per_user: usize,
    /// Bytes of qrels text one user keeps, all together (429 beyond).
    pub qrels_bytes_per_user: usize,
    /// Seconds a request body (JSON, qrels text) may take to arrive, in all (408 beyond);
    /// uploads have their own deadline (`uploads.deadline_secs`).
    pub body_read_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            statements_per_conversation: 200,
            conversations_per_user: 10_000,
            utterance_chars: 10_000,
            statement_chars: 2000,
            chat_messages: 200,
            message_chars: 20_000,
            turns_per_minute: 60,
            searches_per_minute: 300,
            qrels_bytes: Self::DEFAULT_QRELS_BYTES,
            qrels_per_user: 50,
            qrels_bytes_per_user: 64 << 20,
            body_read_secs: 30,
        }
    }
}

impl Limits {
    /// `qrels_bytes` unless configured: iKAT's and TREC DL's judgments are a few MB.
    pub const DEFAULT_QRELS_BYTES: usize = 8 << 20;

    /// Only the database's own bounds (batch runs and tools, where the operator is the user).
    pub fn unlimited() -> Self {
        Self {
            statements_per_conversation: usize::MAX,
            conversations_per_user: usize::MAX,
            utterance_chars: 10_000,
            statement_chars: 2000,
            chat_messages: usize::MAX,
            message_chars: usize::MAX,
            turns_per_minute: 0,
            searches_per_minute: 0,
            qrels_bytes: Self::DEFAULT_QRELS_BYTES,
            qrels_per_user: usize::MAX,
            qrels_bytes_per_user: usize::MAX,
            body_read_secs: 30,
        }
    }

    fn validate(&self) -> Result<()> {
        let bounded = [
            ("limits.utterance_chars", self.utterance_chars, 10_000),
            ("limits.statement_chars", self.statement_chars, 2000),
            ("limits.chat_messages", self.chat_messages, usize::MAX),
            ("limits.message_chars", self.message_chars, usize::MAX),
            (
                "limits.statements_per_conversation",
                self.statements_per_conversation,
                usize::MAX,
            ),
            (
                "limits.conversations_per_user",
                self.conversations_per_user,
                usize::MAX,
            ),
            // Within PostgreSQL's 1 GB text value.
            ("limits.qrels_bytes", self.qrels_bytes, 512 << 20),
            ("limits.qrels_per_user", self.qrels_per_user, usize::MAX),
            (
                "limits.qrels_bytes_per_user",
                self.qrels_bytes_per_user,
                usize::MAX,
            ),
            (
                "limits.body_read_secs",
                usize::try_from(self.body_read_secs).unwrap_or(usize::MAX),
                86_400,
            ),
        ];
        for (name, value, max) in bounded {
            if value == 0 || value > max {
                return Err(ConfigError::Invalid {
                    name,
                    message: format!("must be between 1 and {max}, got {value}"),
                });
            }
        }
        Ok(())
    }
}

/// The whole effective configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Data directory: indexes, models, the embedded database cluster.
    pub home: PathBuf,
    /// External PostgreSQL; when absent the server runs its own cluster under `home`.
    pub database_url: Option<String>,
    /// Address the HTTP server binds.
    pub bind: String,
    /// A second address serving only `GET /metrics`, without a token (for the monitoring
    /// system); when absent, `/metrics` is served on `bind` to the administrator only.
    pub metrics_bind: Option<String>,
    /// Token that may create users. When absent one is generated into `home/admin_token`.
    pub admin_token: Option<String>,
    /// Largest accepted HTTP request body, in bytes.
    pub max_body_bytes: usize,
    /// Web origins (`https://chat.example.org`) whose pages may call `/v1/*` and `/mcp` from the
    /// browser; none by default.
    pub cors_origins: Vec<String>,
    /// Path of `libonnxruntime.so`; when absent, `ORT_DYLIB_PATH` or `home/onnxruntime/`.
    pub ort_dylib_path: Option<PathBuf>,
    /// Directory of the default reranking model; when absent `home/models/all-MiniLM-L6-v2`.
    pub model_dir: Option<PathBuf>,
    /// Directory of HTML pages `serve` builds the default collection from (in the background,
    /// once); when absent there is no default collection.
    pub default_collection_source: Option<PathBuf>,
    /// Name of the default collection; new conversations without a collection use it.
    pub default_collection: String,
    /// Longest answer (in words) of a chat turn (the page, the turns API, OpenAI chat, MCP) when
    /// the request names none; batch runs keep their track's limit.
    pub chat_max_words: usize,
    pub llm: LlmConfig,
    pub database: DatabaseConfig,
    pub uploads: UploadLimits,
    pub limits: Limits,
    pub dense: DenseConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            home: PathBuf::from("./.convrag"),
            database_url: None,
            bind: "127.0.0.1:8080".to_string(),
            metrics_bind: None,
            admin_token: None,
            max_body_bytes: 1024 * 1024,
            cors_origins: Vec::new(),
            ort_dylib_path: None,
            model_dir: None,
            default_collection_source: None,
            default_collection: "postgresql-manual".to_string(),
            chat_max_words: 100,
            llm: LlmConfig::default(),
            database: DatabaseConfig::default(),
            uploads: UploadLimits::default(),
            limits: Limits::default(),
            dense: DenseConfig::default(),
        }
    }
}

/// Values given on the command line; they win over everything else.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config_file: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub bind: Option<String>,
    pub metrics_bind: Option<String>,
    pub database_url: Option<String>,
}

/// One row of `convrag config` and of the README's configuration table.
pub struct Setting {
    pub env: &'static str,
    pub toml_key: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// Every environment variable convrag reads, in one place.
pub const SETTINGS: &[Setting] = &[
    Setting {
        env: "CONVRAG_CONFIG",
        toml_key: "-",
        default: "./convrag.toml if present",
        meaning: "configuration file to read",
    },
    Setting {
        env: "CONVRAG_HOME",
        toml_key: "home",
        default: "./.convrag",
        meaning: "data directory (indexes, models, embedded database)",
    },
    Setting {
        env: "DATABASE_URL",
        toml_key: "database_url",
        default: "unset: embedded cluster in CONVRAG_HOME/pgdata",
        meaning:
            "external PostgreSQL URL (`?pgbouncer=true`: through PgBouncer transaction pooling)",
    },
    Setting {
        env: "CONVRAG_BIND",
        toml_key: "bind",
        default: "127.0.0.1:8080",
        meaning: "HTTP listen address (also --bind)",
    },
    Setting {
        env: "CONVRAG_METRICS_BIND",
        toml_key: "metrics_bind",
        default: "none",
        meaning: "address serving only GET /metrics without a token (also --metrics-bind); else /metrics needs the admin token",
    },
    Setting {
        env: "CONVRAG_LOG_FORMAT",
        toml_key: "-",
        default: "text",
        meaning: "log lines on stderr: text, or json (one object per line)",
    },
    Setting {
        env: "OTEL_EXPORTER_OTLP_ENDPOINT",
        toml_key: "-",
        default: "none",
        meaning: "export traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf or http/json; the other OTEL_* variables apply)",
    },
    Setting {
        env: "CONVRAG_ADMIN_TOKEN",
        toml_key: "admin_token",
        default: "generated into CONVRAG_HOME/admin_token",
        meaning: "token allowed to create users",
    },
    Setting {
        env: "CONVRAG_CORS_ORIGINS",
        toml_key: "cors_origins",
        default: "none",
        meaning: "comma-separated web origins whose pages may call /v1/* and /mcp (CORS)",
    },
    Setting {
        env: "CONVRAG_MAX_BODY_BYTES",
        toml_key: "max_body_bytes",
        default: "1048576",
        meaning: "largest accepted request body",
    },
    Setting {
        env: "CONVRAG_LIMIT_STATEMENTS_PER_CONVERSATION",
        toml_key: "limits.statements_per_conversation",
        default: "200",
        meaning: "PTKB statements in a conversation, and profile statements (429 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_CONVERSATIONS_PER_USER",
        toml_key: "limits.conversations_per_user",
        default: "10000",
        meaning: "conversations one user may keep (429 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_UTTERANCE_CHARS",
        toml_key: "limits.utterance_chars",
        default: "10000",
        meaning: "longest utterance, at most 10000 (413 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_STATEMENT_CHARS",
        toml_key: "limits.statement_chars",
        default: "2000",
        meaning: "longest PTKB/profile statement, at most 2000 (413 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_CHAT_MESSAGES",
        toml_key: "limits.chat_messages",
        default: "200",
        meaning: "messages in one chat request, imported history included (400 naming messages)",
    },
    Setting {
        env: "CONVRAG_LIMIT_MESSAGE_CHARS",
        toml_key: "limits.message_chars",
        default: "20000",
        meaning: "longest chat message of any role (400 naming the message)",
    },
    Setting {
        env: "CONVRAG_LIMIT_TURNS_PER_MINUTE",
        toml_key: "limits.turns_per_minute",
        default: "60",
        meaning: "turns per user per minute, 0 = unlimited (429 with Retry-After)",
    },
    Setting {
        env: "CONVRAG_LIMIT_SEARCHES_PER_MINUTE",
        toml_key: "limits.searches_per_minute",
        default: "300",
        meaning: "searches per user per minute, 0 = unlimited (429 with Retry-After)",
    },
    Setting {
        env: "CONVRAG_LIMIT_QRELS_BYTES",
        toml_key: "limits.qrels_bytes",
        default: "8388608",
        meaning: "largest qrels text of one PUT /v1/qrels/{name} (413 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_QRELS_PER_USER",
        toml_key: "limits.qrels_per_user",
        default: "50",
        meaning: "qrels one user keeps (429 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_QRELS_BYTES_PER_USER",
        toml_key: "limits.qrels_bytes_per_user",
        default: "67108864",
        meaning: "bytes of qrels text one user keeps in all (429 beyond)",
    },
    Setting {
        env: "CONVRAG_LIMIT_BODY_READ_SECS",
        toml_key: "limits.body_read_secs",
        default: "30",
        meaning: "seconds a JSON or qrels request body may take to arrive in all (408 beyond)",
    },
    Setting {
        env: "ORT_DYLIB_PATH",
        toml_key: "ort_dylib_path",
        default: "CONVRAG_HOME/onnxruntime/libonnxruntime.so.1.31.1",
        meaning: "ONNX Runtime shared library",
    },
    Setting {
        env: "CONVRAG_MODEL_DIR",
        toml_key: "model_dir",
        default: "CONVRAG_HOME/models/all-MiniLM-L6-v2",
        meaning: "default reranking model directory",
    },
    Setting {
        env: "CONVRAG_DEFAULT_COLLECTION_SOURCE",
        toml_key: "default_collection_source",
        default: "unset: no default collection",
        meaning: "HTML pages serve indexes once as the default collection (also serve --default-collection)",
    },
    Setting {
        env: "CONVRAG_DEFAULT_COLLECTION",
        toml_key: "default_collection",
        default: "postgresql-manual",
        meaning: "name of the default collection, used by new conversations",
    },
    Setting {
        env: "CONVRAG_CHAT_MAX_WORDS",
        toml_key: "chat_max_words",
        default: "100",
        meaning: "longest chat answer in words when a request names none (batch runs keep the track's limit)",
    },
    Setting {
        env: "CONVRAG_LLM_BASE_URL",
        toml_key: "llm.base_url",
        default: "unset: extractive answers",
        meaning: "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1",
    },
    Setting {
        env: "CONVRAG_LLM_MODEL",
        toml_key: "llm.model",
        default: "default",
        meaning: "model name sent to the endpoint",
    },
    Setting {
        env: "CONVRAG_LLM_API_KEY",
        toml_key: "llm.api_key",
        default: "unset",
        meaning: "bearer key for the endpoint",
    },
    Setting {
        env: "CONVRAG_LLM_TIMEOUT_SECS",
        toml_key: "llm.timeout_secs",
        default: "60",
        meaning: "timeout of one LLM request",
    },
    Setting {
        env: "CONVRAG_DB_POOL_SIZE",
        toml_key: "database.pool_size",
        default: "16",
        meaning: "connections of the main database pool",
    },
    Setting {
        env: "CONVRAG_DB_AUTH_POOL_SIZE",
        toml_key: "database.auth_pool_size",
        default: "4",
        meaning: "connections kept for token lookups",
    },
    Setting {
        env: "CONVRAG_DB_ACQUIRE_TIMEOUT_MS",
        toml_key: "database.acquire_timeout_ms",
        default: "3000",
        meaning: "wait for a pooled connection before 503",
    },
    Setting {
        env: "CONVRAG_TURN_LEASE_SECS",
        toml_key: "database.turn_lease_secs",
        default: "30",
        meaning:
            "a turn's renewed lease on its conversation (a crashed holder blocks it this long)",
    },
    Setting {
        env: "CONVRAG_TURN_WAIT_SECS",
        toml_key: "database.turn_wait_secs",
        default: "120",
        meaning: "wait for a running turn of the same conversation before 409 conversation_busy",
    },
    Setting {
        env: "CONVRAG_IDEMPOTENCY_HOURS",
        toml_key: "database.idempotency_hours",
        default: "24",
        meaning: "how long Idempotency-Key results are kept",
    },
    Setting {
        env: "CONVRAG_UPLOAD_BODY_IDLE_SECS",
        toml_key: "uploads.body_idle_secs",
        default: "30",
        meaning: "seconds an upload's body may send nothing before it is refused (408)",
    },
    Setting {
        env: "CONVRAG_UPLOAD_DEADLINE_SECS",
        toml_key: "uploads.deadline_secs",
        default: "60",
        meaning: "seconds an upload's whole body may take at least (408 beyond its deadline)",
    },
    Setting {
        env: "CONVRAG_UPLOAD_MIN_BYTES_PER_SEC",
        toml_key: "uploads.min_bytes_per_sec",
        default: "65536",
        meaning: "an upload's deadline is max(uploads.deadline_secs, declared bytes / this)",
    },
    Setting {
        env: "CONVRAG_UPLOAD_MAX_FILE_BYTES",
        toml_key: "uploads.max_file_bytes",
        default: "10485760",
        meaning: "largest file a user may upload (413 above it)",
    },
    Setting {
        env: "CONVRAG_UPLOAD_MAX_FILES",
        toml_key: "uploads.max_files",
        default: "20",
        meaning: "most files in one upload request",
    },
    Setting {
        env: "CONVRAG_UPLOAD_MAX_DOCUMENTS",
        toml_key: "uploads.max_documents",
        default: "200",
        meaning: "most documents in one private collection",
    },
    Setting {
        env: "CONVRAG_UPLOAD_MAX_COLLECTION_BYTES",
        toml_key: "uploads.max_collection_bytes",
        default: "52428800",
        meaning: "most uploaded bytes in one private collection",
    },
    Setting {
        env: "CONVRAG_UPLOAD_MAX_COLLECTIONS",
        toml_key: "uploads.max_collections",
        default: "10",
        meaning: "most private collections of one user",
    },
    Setting {
        env: "CONVRAG_DENSE_ANN_MIN_VECTORS",
        toml_key: "dense.ann_min_vectors",
        default: "200000",
        meaning: "passages from which a collection's vectors get an HNSW graph that dense search uses instead of the exact scan (BENCHMARKS.md, Approximate search)",
    },
    Setting {
        env: "RUST_LOG",
        toml_key: "-",
        default: "info",
        meaning: "log filter (tracing)",
    },
];

impl Config {
    /// Loads defaults, the configuration file, the process environment and `overrides`.
    pub fn load(overrides: &Overrides) -> Result<Self> {
        Self::load_from(overrides, |name| std::env::var(name).ok())
    }

    /// As [`Config::load`] with an explicit environment, so tests need not touch the process's.
    pub fn load_from(overrides: &Overrides, env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let explicit = overrides
            .config_file
            .clone()
            .or_else(|| env("CONVRAG_CONFIG").map(PathBuf::from));
        let mut config = match explicit {
            Some(path) => Self::from_file(&path)?,
            None => {
                let default_path = Path::new("convrag.toml");
                if default_path.exists() {
                    Self::from_file(default_path)?
                } else {
                    Self::default()
                }
            }
        };

        let non_empty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(v) = non_empty("CONVRAG_HOME") {
            config.home = PathBuf::from(v);
        }
        if let Some(v) = non_empty("DATABASE_URL") {
            config.database_url = Some(v);
        }
        if let Some(v) = non_empty("CONVRAG_BIND") {
            config.bind = v;
        }
        if let Some(v) = non_empty("CONVRAG_METRICS_BIND") {
            config.metrics_bind = Some(v);
        }
        if let Some(v) = non_empty("CONVRAG_CORS_ORIGINS") {
            config.cors_origins = v
                .split(',')
                .map(|o| o.trim().to_string())
                .filter(|o| !o.is_empty())
                .collect();
        }
        if let Some(v) = non_empty("CONVRAG_ADMIN_TOKEN") {
            config.admin_token = Some(v);
        }
        if let Some(v) = non_empty("CONVRAG_MAX_BODY_BYTES") {
            config.max_body_bytes = v.trim().parse().map_err(|_| ConfigError::Invalid {
                name: "CONVRAG_MAX_BODY_BYTES",
                message: format!("expected a whole number of bytes, got {v:?}"),
            })?;
        }
        apply_limit_env(&mut config.limits, &non_empty)?;
        if let Some(v) = non_empty("ORT_DYLIB_PATH") {
            config.ort_dylib_path = Some(PathBuf::from(v));
        }
        if let Some(v) = non_empty("CONVRAG_MODEL_DIR") {
            config.model_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = non_empty("CONVRAG_DEFAULT_COLLECTION_SOURCE") {
            config.default_collection_source = Some(PathBuf::from(v));
        }
        if let Some(v) = non_empty("CONVRAG_DEFAULT_COLLECTION") {
            config.default_collection = v;
        }
        if let Some(v) = non_empty("CONVRAG_CHAT_MAX_WORDS") {
            config.chat_max_words = v.trim().parse().map_err(|_| ConfigError::Invalid {
                name: "CONVRAG_CHAT_MAX_WORDS",
                message: format!("expected a whole number of words, got {v:?}"),
            })?;
        }
        if let Some(v) = non_empty("CONVRAG_LLM_BASE_URL") {
            config.llm.base_url = Some(v);
        }
        if let Some(v) = non_empty("CONVRAG_LLM_MODEL") {
            config.llm.model = v;
        }
        if let Some(v) = non_empty("CONVRAG_LLM_API_KEY") {
            config.llm.api_key = Some(v);
        }
        if let Some(v) = non_empty("CONVRAG_LLM_TIMEOUT_SECS") {
            config.llm.timeout_secs = v.trim().parse().map_err(|_| ConfigError::Invalid {
                name: "CONVRAG_LLM_TIMEOUT_SECS",
                message: format!("expected a whole number of seconds, got {v:?}"),
            })?;
        }
        load_database_env(&mut config.database, &non_empty)?;

        config.uploads.load_env(&non_empty)?;
        if let Some(v) = non_empty("CONVRAG_DENSE_ANN_MIN_VECTORS") {
            config.dense.ann_min_vectors = v.trim().parse().map_err(|_| ConfigError::Invalid {
                name: "CONVRAG_DENSE_ANN_MIN_VECTORS",
                message: format!("expected a whole number of passages, got {v:?}"),
            })?;
        }

        if let Some(v) = &overrides.home {
            config.home = v.clone();
        }
        if let Some(v) = &overrides.bind {
            config.bind = v.clone();
        }
        if let Some(v) = &overrides.metrics_bind {
            config.metrics_bind = Some(v.clone());
        }
        if let Some(v) = &overrides.database_url {
            config.database_url = Some(v.clone());
        }
        config.validate()?;
        Ok(config)
    }

    fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    fn validate(&self) -> Result<()> {
        if self.bind.parse::<std::net::SocketAddr>().is_err() && !self.bind.contains(':') {
            return Err(ConfigError::Invalid {
                name: "bind",
                message: format!("expected HOST:PORT, got {:?}", self.bind),
            });
        }
        if let Some(bind) = &self.metrics_bind {
            if bind.parse::<std::net::SocketAddr>().is_err() && !bind.contains(':') {
                return Err(ConfigError::Invalid {
                    name: "metrics_bind",
                    message: format!("expected HOST:PORT, got {bind:?}"),
                });
            }
        }
        for origin in &self.cors_origins {
            if !valid_origin(origin) {
                return Err(ConfigError::Invalid {
                    name: "cors_origins",
                    message: format!(
                        "{origin:?} is not a web origin (scheme://host[:port], no path), or \"*\""
                    ),
                });
            }
        }
        if !(1..=2000).contains(&self.chat_max_words) {
            return Err(ConfigError::Invalid {
                name: "chat_max_words",
                message: format!("must be between 1 and 2000, got {}", self.chat_max_words),
            });
        }
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid {
                name: "max_body_bytes",
                message: "must be at least 1024".to_string(),
            });
        }
        let d = &self.database;
        for (name, value) in [
            ("database.pool_size", u64::from(d.pool_size)),
            ("database.auth_pool_size", u64::from(d.auth_pool_size)),
            ("database.acquire_timeout_ms", d.acquire_timeout_ms),
            ("database.turn_lease_secs", d.turn_lease_secs),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    name,
                    message: "must be at least 1".to_string(),
                });
            }
        }
        if crate::index::validate_name(&self.default_collection).is_err() {
            return Err(ConfigError::Invalid {
                name: "default_collection",
                message: format!(
                    "{:?} is not a collection name (letters, digits, '-', '_', '.')",
                    self.default_collection
                ),
            });
        }
        self.limits.validate()?;
        if self.dense.ann_min_vectors == 0 {
            return Err(ConfigError::Invalid {
                name: "dense.ann_min_vectors",
                message: "must be at least 1".to_string(),
            });
        }
        if let Some(url) = &self.llm.base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError::Invalid {
                    name: "llm.base_url",
                    message: format!("expected an http:// or https:// URL, got {url:?}"),
                });
            }
        }
        Ok(())
    }

    /// Directory of the embedded PostgreSQL cluster.
    pub fn pgdata_dir(&self) -> PathBuf {
        self.home.join("pgdata")
    }

    /// Root directory of the collections' indexes.
    pub fn collections_dir(&self) -> PathBuf {
        self.home.join("collections")
    }

    /// Directory of the default reranking model.
    pub fn default_model_dir(&self) -> PathBuf {
        self.model_dir
            .clone()
            .unwrap_or_else(|| self.home.join("models").join("all-MiniLM-L6-v2"))
    }

    /// Where the ONNX Runtime library is looked for.
    pub fn ort_library_path(&self) -> PathBuf {
        self.ort_dylib_path.clone().unwrap_or_else(|| {
            self.home
                .join("onnxruntime")
                .join("libonnxruntime.so.1.31.1")
        })
    }

    /// The configuration as TOML with secrets masked, for `convrag config`.
    pub fn to_display_toml(&self) -> String {
        let mut shown = self.clone();
        if shown.admin_token.is_some() {
            shown.admin_token = Some("<set>".to_string());
        }
        if shown.llm.api_key.is_some() {
            shown.llm.api_key = Some("<set>".to_string());
        }
        if let Some(url) = &shown.database_url {
            shown.database_url = Some(redact_url(url));
        }
        if let Some(url) = &shown.llm.base_url {
            shown.llm.base_url = Some(redact_url(url));
        }
        toml::to_string_pretty(&shown).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

/// The `[database]` settings given in the environment.
fn load_database_env(
    database: &mut DatabaseConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<()> {
    fn number<T: std::str::FromStr>(name: &'static str, value: &str) -> Result<T> {
        value.trim().parse().map_err(|_| ConfigError::Invalid {
            name,
            message: format!("expected a whole number, got {value:?}"),
        })
    }
    if let Some(v) = env("CONVRAG_DB_POOL_SIZE") {
        database.pool_size = number("CONVRAG_DB_POOL_SIZE", &v)?;
    }
    if let Some(v) = env("CONVRAG_DB_AUTH_POOL_SIZE") {
        database.auth_pool_size = number("CONVRAG_DB_AUTH_POOL_SIZE", &v)?;
    }
    if let Some(v) = env("CONVRAG_DB_ACQUIRE_TIMEOUT_MS") {
        database.acquire_timeout_ms = number("CONVRAG_DB_ACQUIRE_TIMEOUT_MS", &v)?;
    }
    if let Some(v) = env("CONVRAG_TURN_LEASE_SECS") {
        database.turn_lease_secs = number("CONVRAG_TURN_LEASE_SECS", &v)?;
    }
    if let Some(v) = env("CONVRAG_TURN_WAIT_SECS") {
        database.turn_wait_secs = number("CONVRAG_TURN_WAIT_SECS", &v)?;
    }
    if let Some(v) = env("CONVRAG_IDEMPOTENCY_HOURS") {
        database.idempotency_hours = number("CONVRAG_IDEMPOTENCY_HOURS", &v)?;
    }
    Ok(())
}

/// The `CONVRAG_LIMIT_*` variables on top of `limits`.
fn apply_limit_env(limits: &mut Limits, env: &impl Fn(&str) -> Option<String>) -> Result<()> {
    fn number<T: std::str::FromStr>(name: &'static str, value: &str) -> Result<T> {
        value.trim().parse().map_err(|_| ConfigError::Invalid {
            name,
            message: format!("expected a whole number, got {value:?}"),
        })
    }
    let sizes: [(&'static str, &mut usize); 6] = [
        (
            "CONVRAG_LIMIT_STATEMENTS_PER_CONVERSATION",
            &mut limits.statements_per_conversation,
        ),
        (
            "CONVRAG_LIMIT_CONVERSATIONS_PER_USER",
            &mut limits.conversations_per_user,
        ),
        ("CONVRAG_LIMIT_UTTERANCE_CHARS", &mut limits.utterance_chars),
        ("CONVRAG_LIMIT_STATEMENT_CHARS", &mut limits.statement_chars),
        ("CONVRAG_LIMIT_CHAT_MESSAGES", &mut limits.chat_messages),
        ("CONVRAG_LIMIT_MESSAGE_CHARS", &mut limits.message_chars),
    ];
    for (name, slot) in sizes {
        if let Some(v) = env(name) {
            *slot = number(name, &v)?;
        }
    }
    let rates: [(&'static str, &mut u32); 2] = [
        (
            "CONVRAG_LIMIT_TURNS_PER_MINUTE",
            &mut limits.turns_per_minute,
        ),
        (
            "CONVRAG_LIMIT_SEARCHES_PER_MINUTE",
            &mut limits.searches_per_minute,
        ),
    ];
    for (name, slot) in rates {
        if let Some(v) = env(name) {
            *slot = number(name, &v)?;
        }
    }
    let qrels: [(&'static str, &mut usize); 3] = [
        ("CONVRAG_LIMIT_QRELS_BYTES", &mut limits.qrels_bytes),
        ("CONVRAG_LIMIT_QRELS_PER_USER", &mut limits.qrels_per_user),
        (
            "CONVRAG_LIMIT_QRELS_BYTES_PER_USER",
            &mut limits.qrels_bytes_per_user,
        ),
    ];
    for (name, slot) in qrels {
        if let Some(v) = env(name) {
            *slot = number(name, &v)?;
        }
    }
    if let Some(v) = env("CONVRAG_LIMIT_BODY_READ_SECS") {
        limits.body_read_secs = number("CONVRAG_LIMIT_BODY_READ_SECS", &v)?;
    }
    Ok(())
}

/// Query parameters whose values are secrets (`?api_key=...`).
const SECRET_PARAMS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "token",
    "access_token",
    "password",
    "secret",
];

/// A URL safe to log or print: the password of `scheme://user:password@host/...` and the values of
/// secret query parameters become `***`.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => base.to_string(),
            },
            None => base.to_string(),
        },
        None => base.to_string(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()) => {
                    format!("{k}=***")
                }
                _ => p.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

/// Whether `origin` is what browsers send in `Origin`: `http(s)://host[:port]`, or `*` for any.
fn valid_origin(origin: &str) -> bool {
    if origin == "*" {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
    else {
        return false;
    };
    !rest.is_empty()
        && !rest.contains('/')
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn cors_origins_are_web_origins() {
        assert!(valid_origin("https://chat.example.org"));
        assert!(valid_origin("http://127.0.0.1:3000"));
        assert!(valid_origin("*"));
        assert!(!valid_origin("chat.example.org"));
        assert!(!valid_origin("https://chat.example.org/path"));
        assert!(!valid_origin("https://"));
    }

    #[test]
    fn listener_cors_and_upload_settings_are_refused_at_load_naming_them() {
        let refused = |pairs: &[(&str, &str)]| match Config::load_from(
            &Overrides::default(),
            env_of(pairs),
        ) {
            Err(ConfigError::Invalid { name, message }) => (name, message),
            other => panic!("{pairs:?} was not refused: {other:?}"),
        };
        let (name, message) = refused(&[("CONVRAG_METRICS_BIND", "9100")]);
        assert_eq!(name, "metrics_bind");
        assert!(
            message.contains("HOST:PORT") && message.contains("9100"),
            "{message}"
        );
        let (name, message) = refused(&[(
            "CONVRAG_CORS_ORIGINS",
            "https://chat.example.org, chat.example.org",
        )]);
        assert_eq!(name, "cors_origins");
        assert!(message.starts_with("\"chat.example.org\""), "{message}");
        let (name, message) = refused(&[("CONVRAG_UPLOAD_BODY_IDLE_SECS", "0")]);
        assert_eq!(name, "CONVRAG_UPLOAD_BODY_IDLE_SECS");
        assert_eq!(message, "must be at least 1");
        // The same settings, valid, load.
        let config = Config::load_from(
            &Overrides::default(),
            env_of(&[
                ("CONVRAG_METRICS_BIND", "127.0.0.1:9100"),
                (
                    "CONVRAG_CORS_ORIGINS",
                    "https://chat.example.org,http://127.0.0.1:3000",
                ),
                ("CONVRAG_UPLOAD_BODY_IDLE_SECS", "5"),
            ]),
        )
        .unwrap();
        assert_eq!(config.metrics_bind.as_deref(), Some("127.0.0.1:9100"));
        assert_eq!(
            config.cors_origins,
            ["https://chat.example.org", "http://127.0.0.1:3000"]
        );
        assert_eq!(config.uploads.body_idle_secs, 5);
    }

    #[test]
    fn defaults_apply_without_file_or_env() {
        let dir = tempfile::tempdir().unwrap();
        let overrides = Overrides {
            config_file: None,
            ..Default::default()
        };
        // Run from a directory without convrag.toml: only defaults.
        let config = Config::load_from(&overrides, env_of(&[])).unwrap();
        assert_eq!(config.bind, "127.0.0.1:8080");
        assert!(config.database_url.is_none());
        drop(dir);
    }

    #[test]
    fn layers_override_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("convrag.toml");
        std::fs::write(
            &file,
            "bind = \"127.0.0.1:9000\"\nhome = \"/from/file\"\n[llm]\nmodel = \"m\"\n",
        )
        .unwrap();
        let overrides = Overrides {
            config_file: Some(file),
            bind: Some("127.0.0.1:9100".into()),
            ..Default::default()
        };
        let config = Config::load_from(
            &overrides,
            env_of(&[
                ("CONVRAG_HOME", "/from/env"),
                ("CONVRAG_BIND", "127.0.0.1:9050"),
            ]),
        )
        .unwrap();
        assert_eq!(config.home, PathBuf::from("/from/env"));
        assert_eq!(config.bind, "127.0.0.1:9100");
        assert_eq!(config.llm.model, "m");
    }

    #[test]
    fn unknown_key_in_file_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("convrag.toml");
        std::fs::write(&file, "bnd = \"x\"\n").unwrap();
        let overrides = Overrides {
            config_file: Some(file.clone()),
            ..Default::default()
        };
        let err = Config::load_from(&overrides, env_of(&[])).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("convrag.toml"), "{text}");
        assert!(text.contains("bnd"), "{text}");
    }

    #[test]
    fn bad_numbers_are_named() {
        let err = Config::load_from(
            &Overrides::default(),
            env_of(&[("CONVRAG_MAX_BODY_BYTES", "lots")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("CONVRAG_MAX_BODY_BYTES"));
    }

    #[test]
    fn the_ann_threshold_comes_from_file_and_env_and_is_at_least_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("convrag.toml");
        std::fs::write(&file, "[dense]\nann_min_vectors = 5000\n").unwrap();
        let from_file = Overrides {
            config_file: Some(file),
            ..Default::default()
        };
        let config = Config::load_from(&from_file, env_of(&[])).unwrap();
        assert_eq!(config.dense.ann_min_vectors, 5000);
        let env = env_of(&[("CONVRAG_DENSE_ANN_MIN_VECTORS", "7")]);
        let config = Config::load_from(&from_file, env).unwrap();
        assert_eq!(config.dense.ann_min_vectors, 7);
        assert_eq!(
            Config::default().dense.ann_min_vectors,
            DenseConfig::DEFAULT_ANN_MIN_VECTORS
        );
        for (value, named) in [
            ("0", "dense.ann_min_vectors"),
            ("many", "CONVRAG_DENSE_ANN_MIN_VECTORS"),
        ] {
            let env = env_of(&[("CONVRAG_DENSE_ANN_MIN_VECTORS", value)]);
            let err = Config::load_from(&Overrides::default(), env).unwrap_err();
            assert!(err.to_string().contains(named), "{err}");
        }
    }

    #[test]
    fn database_settings_come_from_file_and_env() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("convrag.toml");
        std::fs::write(&file, "[database]\npool_size = 8\nturn_lease_secs = 10\n").unwrap();
        let overrides = Overrides {
            config_file: Some(file),
            ..Default::default()
        };
        let config = Config::load_from(
            &overrides,
            env_of(&[
                ("CONVRAG_TURN_LEASE_SECS", "5"),
                ("CONVRAG_IDEMPOTENCY_HOURS", "2"),
            ]),
        )
        .unwrap();
        let d = &config.database;
        assert_eq!((d.pool_size, d.auth_pool_size), (8, 4));
        assert_eq!((d.turn_lease_secs, d.idempotency_hours), (5, 2));
        let err = Config::load_from(
            &Overrides::default(),
            env_of(&[("CONVRAG_DB_POOL_SIZE", "0")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("database.pool_size"), "{err}");
        let err = Config::load_from(
            &Overrides::default(),
            env_of(&[("CONVRAG_TURN_WAIT_SECS", "soon")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("CONVRAG_TURN_WAIT_SECS"), "{err}");
    }

    #[test]
    fn limits_come_from_file_and_environment_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("convrag.toml");
        std::fs::write(
            &file,
            "[limits]\nstatements_per_conversation = 7\nturns_per_minute = 5\n",
        )
        .unwrap();
        let overrides = Overrides {
            config_file: Some(file),
            ..Default::default()
        };
        let config = Config::load_from(
            &overrides,
            env_of(&[("CONVRAG_LIMIT_TURNS_PER_MINUTE", "9")]),
        )
        .unwrap();
        assert_eq!(config.limits.statements_per_conversation, 7);
        assert_eq!(config.limits.turns_per_minute, 9);
        assert_eq!(config.limits.utterance_chars, 10_000);
        let err = Config::load_from(
            &Overrides::default(),
            env_of(&[("CONVRAG_LIMIT_UTTERANCE_CHARS", "20000")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("limits.utterance_chars"), "{err}");
        let err = Config::load_from(
            &Overrides::default(),
            env_of(&[("CONVRAG_LIMIT_SEARCHES_PER_MINUTE", "many")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("CONVRAG_LIMIT_SEARCHES_PER_MINUTE"),
            "{err}"
        );
    }

    #[test]
    fn secrets_are_masked_in_display() {
        let config = Config {
            admin_token: Some("secret".into()),
            database_url: Some("postgres://u:pw@h/db".into()),
            ..Config::default()
        };
        let shown = config.to_display_toml();
        assert!(!shown.contains("secret"));
        assert!(!shown.contains("pw@"));
        assert!(shown.contains("postgres://u:***@h/db"));
    }

    #[test]
    fn redacted_urls_hide_passwords_and_secret_parameters() {
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/db?sslmode=require&password=x"),
            "postgres://u:***@h:5432/db?sslmode=require&password=***"
        );
        assert_eq!(
            redact_url("https://api.example/v1?key=abc&model=m"),
            "https://api.example/v1?key=***&model=m"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }
}
