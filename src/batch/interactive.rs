//! The TREC iKAT interactive task (`convrag ikat interactive`): a client of the Simulation API
//! (Sim.API, `marcel-gohsen/user-simulation-api`) that answers simulated users turn by turn.
//!
//! The contract followed is the repository's `README.md` (endpoints, auth, flow) and
//! `src/api/messages.py` / `src/api/run_router.py` (field names and types, status codes):
//!
//! * `POST {run|debug}/start` with `RunMeta {run_id, description, track_persona, team_id?}`
//!   → `UserUtterance {timestamp, run_id, topic_id, user_id, utterance, history,
//!   last_response_of_session, last_response_of_run}`; 412 when the run exists already.
//! * `POST {run|debug}/continue` with `AssistantResponse {run_id, response, citations,
//!   ptkb_provenance}` → the next `UserUtterance`. After `last_response_of_session` the next call
//!   carries an empty response (ignored by the API) and opens the next topic; after
//!   `last_response_of_run` no further call is made.
//! * `GET {run|debug}/session?run_id=` → the open session as a `UserUtterance` (used to resume).
//! * `GET run/dump?run_id=` → the run as the API recorded it (line-delimited JSON, one record per
//!   user utterance); checked against the stored turns once the run ends.
//! * Every request carries `Authorization: Bearer <token>`.
//!
//! Every user utterance is one turn of a stored conversation (external id
//! `<run id>/<topic id>/<user id>`, turn id `<topic id>_<n>` with `n` counting the session's user
//! utterances from 0 as `run/dump` numbers them) computed by [`TurnService`] like any batch turn,
//! so the history the API sends is the stored conversation. Resuming: the API keeps the run's
//! state; a stored turn for the utterance the open session waits on is sent as stored, never
//! computed twice, and finished sessions are never asked for again.
//!
//! The contract's `UserUtterance` carries no PTKB. With `--track-persona` the statements a user
//! made about themselves ([`persona_statements`]) in this run's stored sessions become the PTKB
//! of their next session; derived from the store, a resumed run remembers the same.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::engine::{store_turn, TurnPosition};
use super::ikat::PtkbList;
use super::{BatchError, Result};
use crate::formats::ikat25::{self, Ikat25Metadata, Ikat25RunType, MAX_RESPONSE_WORDS};
use crate::formats::trec_run::submitted_score;
use crate::pipeline::generate::WordLimit;
use crate::pipeline::turn::TurnSettings;
use crate::progress::SharedProgress;
use crate::service::{RequestedSettings, SettingLimits, TurnRequest, TurnService};
use crate::store::{Conversation, NewConversation, NewStatement, RunConversations, Store, Turn};

/// Attempts of one request when the API answers 5xx or does not answer.
const ATTEMPTS: u32 = 4;
/// Citations the contract accepts per response (README: "up to top 1000").
pub const MAX_CITATIONS: usize = 1000;

/// Which endpoints a run uses: the evaluated ones or the debugging ones (same inputs, README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiMode {
    Run,
    Debug,
}

impl ApiMode {
    fn prefix(self) -> &'static str {
        match self {
            ApiMode::Run => "run",
            ApiMode::Debug => "debug",
        }
    }
}

/// What `convrag ikat interactive` was asked to do.
#[derive(Debug, Clone)]
pub struct InteractiveOptions {
    /// The API's base URL (`https://trec-ikat25.webis.de/simulation/`).
    pub api: String,
    pub token: Option<String>,
    pub team_id: Option<String>,
    pub run_id: String,
    pub description: String,
    pub track_persona: bool,
    pub mode: ApiMode,
    pub collection: String,
    pub settings: TurnSettings,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// The turn settings of an interactive run: `requested` on top of iKAT's (100 passages, the
/// response limit `messages.py` checks), within the contract's limits.
pub fn settings(service: &TurnService, requested: &RequestedSettings) -> Result<TurnSettings> {
    let base = TurnSettings {
        passages: 100,
        limit: WordLimit::IKAT,
        ..TurnSettings::default()
    };
    let limits = SettingLimits {
        passages: MAX_CITATIONS,
        max_words: MAX_RESPONSE_WORDS,
    };
    service
        .resolve(requested, base, limits)
        .map_err(|e| super::option(super::plan::option_name(e.field), e.reason))
}

/// What a finished interactive run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InteractiveSummary {
    /// Sessions (topics) that ended during this invocation.
    pub sessions: usize,
    /// Turns computed now.
    pub computed: usize,
    /// Turns found stored and sent as stored (after an interruption).
    pub resent: usize,
    /// Whether the run was resumed (the API knew it already).
    pub resumed: bool,
    /// Turns `run/dump` was checked against (`None`: not checked, the debug endpoints have no
    /// dump).
    pub dump_checked: Option<usize>,
}

/// One message of the API (`UserUtterance` in `src/api/messages.py`).
#[derive(Debug, Clone, PartialEq)]
pub struct UserUtterance {
    pub run_id: String,
    pub topic_id: String,
    pub user_id: String,
    pub utterance: String,
    /// `(role, content)` in order; the last entry is this utterance.
    pub history: Vec<(String, String)>,
    pub last_response_of_session: bool,
    pub last_response_of_run: bool,
}

impl UserUtterance {
    /// Parses an API answer, naming the endpoint and field that break the contract.
    pub fn parse(endpoint: &str, body: &Value) -> Result<UserUtterance> {
        let bad =
            |field: &str, reason: &str| contract(endpoint, format!("field {field}: {reason}"));
        let obj = body
            .as_object()
            .ok_or_else(|| contract(endpoint, "the answer is not a JSON object".into()))?;
        let text = |field: &str| -> Result<String> {
            match obj.get(field) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(bad(field, "not a string")),
                None => Err(bad(field, "missing")),
            }
        };
        let flag = |field: &str| -> Result<bool> {
            match obj.get(field) {
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(bad(field, "not a boolean")),
                None => Err(bad(field, "missing")),
            }
        };
        // README's second example names it `run_name`; `messages.py` (the model the API
        // validates its answers with) names it `run_id`, which is followed, `run_name` accepted.
        let run_id = match obj.get("run_id").or_else(|| obj.get("run_name")) {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(bad("run_id", "missing or not a string")),
        };
        let history = match obj.get("history") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let role = m.get("role").and_then(Value::as_str);
                    let content = m.get("content").and_then(Value::as_str);
                    match (role, content) {
                        (Some(r), Some(c)) => Ok((r.to_string(), c.to_string())),
                        _ => Err(bad(
                            &format!("history[{i}]"),
                            "needs string fields role and content",
                        )),
                    }
                })
                .collect::<Result<Vec<_>>>()?,
            Some(_) => return Err(bad("history", "not a list")),
            None => return Err(bad("history", "missing")),
        };
        let u = UserUtterance {
            run_id,
            topic_id: text("topic_id")?,
            user_id: text("user_id")?,
            utterance: text("utterance")?,
            history,
            last_response_of_session: flag("last_response_of_session")?,
            last_response_of_run: flag("last_response_of_run")?,
        };
        match u.history.last() {
            Some((role, content)) if role == "user" && *content == u.utterance => Ok(u),
            _ => Err(bad("history", "its last entry is not the user's utterance")),
        }
    }

    /// The index of this utterance among the session's user utterances (from 0).
    fn turn_index(&self) -> usize {
        self.history.iter().filter(|(r, _)| r == "user").count() - 1
    }

    fn turn_id(&self) -> String {
        format!("{}_{}", self.topic_id, self.turn_index())
    }
}

fn contract(endpoint: &str, message: String) -> BatchError {
    BatchError::SimApi {
        endpoint: endpoint.to_string(),
        message,
    }
}

/// An HTTP answer that is not a success.
enum Failure {
    Status(u16, String),
    Batch(BatchError),
}

/// The Sim.API client: base URL, token, retries.
pub struct SimApi {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    mode: ApiMode,
}

impl SimApi {
    pub fn new(
        base: &str,
        token: Option<String>,
        mode: ApiMode,
        timeout: Duration,
    ) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| super::option("--api", e.to_string()))?;
        Ok(SimApi {
            http,
            base: base.trim_end_matches('/').to_string(),
            token,
            mode,
        })
    }

    fn endpoint(&self, name: &str) -> String {
        format!("{}/{name}", self.mode.prefix())
    }

    /// One request whose answer is JSON.
    async fn call(
        &self,
        endpoint: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let text = self.call_text(endpoint, query, body).await?;
        serde_json::from_str(&text)
            .map_err(|e| Failure::Batch(contract(endpoint, format!("the answer is not JSON: {e}"))))
    }

    /// One request, retried with backoff on 5xx and on no answer; a 4xx is returned at once.
    async fn call_text(
        &self,
        endpoint: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<String, Failure> {
        let url = format!("{}/{endpoint}", self.base);
        let mut delay = Duration::from_millis(250);
        for attempt in 1..=ATTEMPTS {
            let mut request = match body {
                Some(b) => self.http.post(&url).json(b),
                None => self.http.get(&url),
            }
            .query(query);
            if let Some(t) = &self.token {
                request = request.bearer_auth(t);
            }
            let retry = match request.send().await {
                Ok(r) if r.status().is_success() => {
                    return r.text().await.map_err(|e| {
                        Failure::Batch(contract(endpoint, format!("the answer is unreadable: {e}")))
                    });
                }
                Ok(r) => {
                    let status = r.status().as_u16();
                    let text = r.text().await.unwrap_or_default();
                    // FastAPI puts the reason in `detail`.
                    let detail = serde_json::from_str::<Value>(&text)
                        .ok()
                        .and_then(|v| {
                            v.get("detail").map(|d| match d {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            })
                        })
                        .unwrap_or(text);
                    if status < 500 || attempt == ATTEMPTS {
                        return Err(Failure::Status(status, detail));
                    }
                    format!("HTTP {status}: {detail}")
                }
                Err(e) if attempt == ATTEMPTS => {
                    return Err(Failure::Batch(contract(
                        endpoint,
                        format!("no answer: {e}"),
                    )))
                }
                Err(e) => e.to_string(),
            };
            tracing::warn!(endpoint, attempt, error = %retry, "Sim.API request failed; retrying");
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
        unreachable!("the last attempt returns")
    }

    async fn utterance(
        &self,
        endpoint: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<UserUtterance> {
        match self.call(endpoint, query, body).await {
            Ok(v) => UserUtterance::parse(endpoint, &v),
            Err(f) => Err(failure(endpoint, f)),
        }
    }

    /// `GET auth/verify` → the team id the token belongs to.
    pub async fn verify(&self) -> Result<String> {
        let endpoint = "auth/verify";
        let v = self
            .call(endpoint, &[], None)
            .await
            .map_err(|f| failure(endpoint, f))?;
        match v.get("team_id") {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(contract(
                endpoint,
                "field team_id: missing or not a string".into(),
            )),
        }
    }
}

fn failure(endpoint: &str, f: Failure) -> BatchError {
    match f {
        Failure::Status(status, detail) => contract(endpoint, format!("HTTP {status}: {detail}")),
        Failure::Batch(e) => e,
    }
}

/// Takes part in (or resumes) an interactive run until the API reports its last response.
pub async fn run(
    service: Arc<TurnService>,
    user_id: i64,
    options: &InteractiveOptions,
    progress: SharedProgress,
) -> Result<InteractiveSummary> {
    let api = SimApi::new(
        &options.api,
        options.token.clone(),
        options.mode,
        options.timeout,
    )?;
    if let Some(team) = &options.team_id {
        let verified = api.verify().await?;
        if verified != *team {
            return Err(super::option(
                "--team-id",
                format!("the token belongs to team {verified:?}, not {team:?}"),
            ));
        }
    }
    let store = service
        .store()
        .map_err(|e| super::service_error(None, e))?
        .clone();
    let client = Client {
        api,
        conversations: store.run_conversations(user_id, &options.run_id),
        service,
        store,
        user_id,
        options,
        progress,
    };
    client.progress.set_message(options.run_id.clone());
    client.run().await
}

struct Client<'a> {
    api: SimApi,
    service: Arc<TurnService>,
    /// The service's store.
    store: Store,
    user_id: i64,
    /// A session is the conversation of topic `<topic id>/<user id>`.
    conversations: RunConversations,
    options: &'a InteractiveOptions,
    progress: SharedProgress,
}

impl Client<'_> {
    async fn run(&self) -> Result<InteractiveSummary> {
        let mut summary = InteractiveSummary::default();
        let mut current = match self.start().await? {
            Some(u) => u,
            None => {
                summary.resumed = true;
                match self.open_session().await? {
                    Some(u) => u,
                    // No open session: the last one ended; an empty response opens the next.
                    None => self.send(None).await?,
                }
            }
        };
        self.show_status().await?;
        loop {
            self.check_run(&current)?;
            if current.last_response_of_run {
                summary.sessions += 1;
                self.progress.inc(1);
                if self.options.mode == ApiMode::Run {
                    summary.dump_checked = Some(self.check_dump().await?);
                }
                break;
            }
            if current.last_response_of_session {
                summary.sessions += 1;
                self.progress.inc(1);
                current = self.send(None).await?;
                continue;
            }
            let (turn, computed) = self.turn(&current).await?;
            if computed {
                summary.computed += 1;
            } else {
                summary.resent += 1;
            }
            current = self.send(Some(&turn)).await?;
        }
        self.progress.finish();
        Ok(summary)
    }

    fn check_run(&self, u: &UserUtterance) -> Result<()> {
        if u.run_id != self.options.run_id {
            return Err(contract(
                &self.api.endpoint("continue"),
                format!(
                    "field run_id: {:?}, this run is {:?}",
                    u.run_id, self.options.run_id
                ),
            ));
        }
        self.progress
            .set_message(format!("{} topic {}", self.options.run_id, u.topic_id));
        Ok(())
    }

    /// Starts the progress from `run/status` (topics open and done; the debug endpoints have
    /// no status, README "Check Run Status").
    async fn show_status(&self) -> Result<()> {
        if self.options.mode != ApiMode::Run {
            return Ok(());
        }
        let endpoint = self.api.endpoint("status");
        let query = [("run_id", self.options.run_id.as_str())];
        let v = self
            .api
            .call(&endpoint, &query, None)
            .await
            .map_err(|f| failure(&endpoint, f))?;
        let count = |field: &str| match v.get(field) {
            Some(Value::Array(items)) => Ok(items.len() as u64),
            _ => Err(contract(
                &endpoint,
                format!("field {field}: missing or not a list"),
            )),
        };
        let (open, done) = (count("open_topics")?, count("done_topics")?);
        self.progress.set_length(open + done);
        self.progress.set_position(done);
        Ok(())
    }

    /// `start`; `None` when the API knows the run already (412).
    async fn start(&self) -> Result<Option<UserUtterance>> {
        let endpoint = self.api.endpoint("start");
        let mut meta = Map::new();
        meta.insert("run_id".into(), json!(self.options.run_id));
        meta.insert("description".into(), json!(self.options.description));
        meta.insert("track_persona".into(), json!(self.options.track_persona));
        if let Some(team) = &self.options.team_id {
            meta.insert("team_id".into(), json!(team));
        }
        match self
            .api
            .call(&endpoint, &[], Some(&Value::Object(meta)))
            .await
        {
            Ok(v) => UserUtterance::parse(&endpoint, &v).map(Some),
            // run_router.py: "Active run with the name ... already exists".
            Err(Failure::Status(412, _)) => Ok(None),
            Err(f) => Err(failure(&endpoint, f)),
        }
    }

    /// The open session of a resumed run; `None` when none is open (the API's `session` fails
    /// then: `run_router.py` reads the missing session), a 428 means the run is complete.
    async fn open_session(&self) -> Result<Option<UserUtterance>> {
        let endpoint = self.api.endpoint("session");
        let query = [("run_id", self.options.run_id.as_str())];
        match self.api.call(&endpoint, &query, None).await {
            Ok(v) => UserUtterance::parse(&endpoint, &v).map(Some),
            Err(Failure::Status(428, detail)) => Err(BatchError::Resume(format!(
                "run {}: {endpoint}: {detail} (a completed run is not continued; --run-id names another)",
                self.options.run_id
            ))),
            Err(Failure::Status(..)) => Ok(None),
            Err(Failure::Batch(e)) => Err(e),
        }
    }

    /// `continue` with a stored turn's answer, or with an empty one after a session's end.
    async fn send(&self, turn: Option<&Turn>) -> Result<UserUtterance> {
        let endpoint = self.api.endpoint("continue");
        let body = match turn {
            Some(t) => assistant_response(&self.options.run_id, t),
            None => json!({"run_id": self.options.run_id, "response": ""}),
        };
        self.api.utterance(&endpoint, &[], Some(&body)).await
    }

    /// The stored turn answering `u`, computed now unless stored before (then `false`).
    async fn turn(&self, u: &UserUtterance) -> Result<(Turn, bool)> {
        let session = format!("{}/{}", u.topic_id, u.user_id);
        let conversation = self.conversation(&session, u).await?;
        let mut turns = self
            .store
            .list_turns(self.user_id, conversation, false)
            .await?;
        let stored: Vec<(i32, Option<&str>)> = turns
            .iter()
            .map(|t| (t.seq, Some(t.utterance.as_str())))
            .collect();
        let history: Vec<&str> = u
            .history
            .iter()
            .filter(|(r, _)| r == "user")
            .map(|(_, c)| c.as_str())
            .collect();
        // The stored conversation must be the API's history: stored turns are the user
        // utterances before this one, or those and this one (computed, not yet sent).
        let done = self
            .conversations
            .resume_point(&session, &stored, &history)?;
        let index = u.turn_index();
        if done > index {
            let turn = turns.pop().expect("one turn at least");
            return Ok((turn, false));
        }
        if done < index {
            return Err(BatchError::Resume(format!(
                "run {}: topic {}: the API is at user utterance {index}, {done} are stored",
                self.options.run_id, u.topic_id
            )));
        }
        let mut request =
            TurnRequest::new(Some(u.utterance.clone()), self.options.settings.clone());
        request.references.external_turn_id = Some(u.turn_id());
        let position = TurnPosition {
            conversation,
            topic: &session,
            seq: done as i32 + 1,
        };
        let turn = store_turn(&self.service, self.user_id, position, request).await?;
        Ok((turn, true))
    }

    async fn conversation(&self, session: &str, u: &UserUtterance) -> Result<Uuid> {
        let new = async {
            // Sim.API's `UserUtterance` carries no PTKB; with `--track-persona` a returning user
            // starts with what they said about themselves in this run's earlier sessions.
            let ptkb = if self.options.track_persona {
                self.remembered(&u.user_id)
                    .await?
                    .into_iter()
                    .map(|text| NewStatement { id: None, text })
                    .collect()
            } else {
                Vec::new()
            };
            Ok::<_, BatchError>(NewConversation {
                title: format!(
                    "iKAT interactive {} topic {}",
                    self.options.run_id, u.topic_id
                ),
                external_id: None,
                collection: Some(self.options.collection.clone()),
                instructions: None,
                ptkb,
            })
        };
        self.conversations.find_or_create(session, new).await
    }

    /// This run's stored conversations in the order they were started, with their topic and
    /// user ids (from the session `<topic id>/<user id>`).
    async fn sessions(&self) -> Result<Vec<(String, String, Uuid)>> {
        Ok(sessions(&self.conversations)
            .await?
            .into_iter()
            .filter_map(|c| {
                let (topic, user) = self.conversations.topic(&c)?.rsplit_once('/')?;
                Some((topic.to_string(), user.to_string(), c.id))
            })
            .collect())
    }

    /// What `user` said about themselves in this run's stored sessions (their PTKB, which holds
    /// the sessions before, and the statements of their utterances), once each, in order.
    async fn remembered(&self, user: &str) -> Result<Vec<String>> {
        let mut statements: Vec<String> = Vec::new();
        let mut add = |text: String| {
            let key = text.to_lowercase();
            if !statements.iter().any(|s| s.to_lowercase() == key) {
                statements.push(text);
            }
        };
        for (_, owner, id) in self.sessions().await? {
            if owner != user {
                continue;
            }
            for s in self.store.ptkb(self.user_id, id, None).await? {
                add(s.text);
            }
            for t in self.store.list_turns(self.user_id, id, false).await? {
                persona_statements(&t.utterance)
                    .into_iter()
                    .for_each(&mut add);
            }
        }
        Ok(statements)
    }

    /// Fetches `run/dump` and checks it holds this run's stored turns: per topic, the same
    /// user utterances in order with the responses sent. The API also records the utterance
    /// that ended a session (no response): the one record with no stored turn.
    async fn check_dump(&self) -> Result<usize> {
        let endpoint = self.api.endpoint("dump");
        let query = [("run_id", self.options.run_id.as_str())];
        let text = self
            .api
            .call_text(&endpoint, &query, None)
            .await
            .map_err(|f| failure(&endpoint, f))?;
        let mut dumped = parse_dump(&endpoint, &text)?;
        let mut checked = 0;
        for (topic, _, id) in self.sessions().await? {
            let turns = self.store.list_turns(self.user_id, id, false).await?;
            let records = dumped.remove(&topic).unwrap_or_default();
            checked += turns.len();
            compare_topic(&topic, &turns, &records)
                .map_err(|m| contract(&endpoint, format!("topic {topic}: {m}")))?;
        }
        if let Some(topic) = dumped.keys().next() {
            return Err(contract(
                &endpoint,
                format!("topic {topic}: in the dump, but this run stored no session of it"),
            ));
        }
        Ok(checked)
    }
}

/// One record of `run/dump`: its turn id (`<topic id>_<n>`), the user utterance and the
/// response the API recorded (`None`: none, as for the utterance that ended a session).
#[derive(Debug, Clone, PartialEq)]
pub struct DumpRecord {
    pub turn_id: String,
    pub utterance: String,
    pub response: Option<String>,
}

/// Parses `run/dump`: line-delimited JSON as `run_router.py` writes it, or one JSON list as
/// the README shows it; each record `{"metadata": {"topic_id": "<topic>_<n>", …}, "responses":
/// [{"user_utterance", "text", …}]}` (`assistant_text` in older versions). Records are grouped
/// by topic, in the order of `n`.
pub fn parse_dump(
    endpoint: &str,
    text: &str,
) -> Result<std::collections::BTreeMap<String, Vec<DumpRecord>>> {
    let items: Vec<Value> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text)
            .map_err(|e| contract(endpoint, format!("the answer is not JSON: {e}")))?
    } else {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map_err(|e| contract(endpoint, format!("record {}: not JSON: {e}", i + 1)))
            })
            .collect::<Result<_>>()?
    };
    let mut topics: std::collections::BTreeMap<String, Vec<(u64, DumpRecord)>> = Default::default();
    for (i, item) in items.iter().enumerate() {
        let bad = |reason: &str| contract(endpoint, format!("record {}: {reason}", i + 1));
        let turn_id = item["metadata"]["topic_id"]
            .as_str()
            .ok_or_else(|| bad("metadata.topic_id missing or not a string"))?;
        let (topic, n) = turn_id
            .rsplit_once('_')
            .and_then(|(t, n)| Some((t, n.parse::<u64>().ok()?)))
            .ok_or_else(|| bad("metadata.topic_id is not <topic id>_<number>"))?;
        let response = &item["responses"][0];
        let utterance = response["user_utterance"]
            .as_str()
            .ok_or_else(|| bad("responses[0].user_utterance missing or not a string"))?;
        let text = match response
            .get("text")
            .or_else(|| response.get("assistant_text"))
        {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(_) => return Err(bad("responses[0].text is not a string")),
        };
        let record = DumpRecord {
            turn_id: turn_id.to_string(),
            utterance: utterance.to_string(),
            response: text,
        };
        topics
            .entry(topic.to_string())
            .or_default()
            .push((n, record));
    }
    Ok(topics
        .into_iter()
        .map(|(topic, mut records)| {
            records.sort_by_key(|(n, _)| *n);
            (topic, records.into_iter().map(|(_, r)| r).collect())
        })
        .collect())
}

/// Compares one topic's stored turns with its dump records; the reason of a mismatch.
fn compare_topic(topic: &str, turns: &[Turn], records: &[DumpRecord]) -> Result<(), String> {
    for (k, turn) in turns.iter().enumerate() {
        let id = turn
            .external_turn_id
            .clone()
            .unwrap_or_else(|| format!("{topic}_{k}"));
        let Some(record) = records.get(k) else {
            return Err(format!(
                "turn {id}: stored and answered, but not in the dump"
            ));
        };
        if record.utterance != turn.utterance {
            return Err(format!(
                "turn {id} (dump {}): the user utterance differs: dump {:?}, stored {:?}",
                record.turn_id, record.utterance, turn.utterance
            ));
        }
        let sent = turn.response_text.as_deref().unwrap_or_default();
        if record.response.as_deref().unwrap_or_default() != sent {
            return Err(format!(
                "turn {id} (dump {}): the response differs: dump {:?}, stored {:?}",
                record.turn_id, record.response, sent
            ));
        }
    }
    match &records[turns.len().min(records.len())..] {
        [] => Ok(()),
        [last] if last.response.as_deref().unwrap_or_default().is_empty() => Ok(()),
        [extra, ..] => Err(format!(
            "turn {}: in the dump with a response, but not stored",
            extra.turn_id
        )),
    }
}

/// The statements a user makes about themselves in `utterance`, remembered with
/// `--track-persona`. The rule, kept simple: a sentence (split after `.`, `!` or `?`) that is
/// not a question (does not end with `?`), has three words or more, and starts with a
/// first-person subject (`I`, `I'm`, `I've`, `I'd`, `My`, `We`, `We're`, `We've`, `Our`),
/// except requests (`I'd like`, `I would like`, `I want to know`, `I wonder`, `I'm looking
/// for`, …), which say what the user asks for, not who they are.
pub fn persona_statements(utterance: &str) -> Vec<String> {
    const SUBJECTS: [&str; 9] = [
        "i", "i'm", "i've", "my", "we", "we're", "we've", "our", "i'd",
    ];
    const REQUESTS: [&str; 10] = [
        "i'd like",
        "i would like",
        "i want to know",
        "i want to find",
        "i wonder",
        "i'm wondering",
        "i am wondering",
        "i'm looking for",
        "i am looking for",
        "i need to know",
    ];
    let normalized = utterance.replace('\u{2019}', "'");
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut chars = normalized.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let at_end = chars.peek().is_none_or(|(_, n)| n.is_whitespace());
        if matches!(c, '.' | '!' | '?') && at_end {
            sentences.push(&normalized[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    sentences.push(&normalized[start..]);
    sentences
        .into_iter()
        .map(str::trim)
        .filter(|sentence| {
            let lower = sentence.to_lowercase();
            let first = lower.split_whitespace().next().unwrap_or_default();
            !sentence.ends_with('?')
                && sentence.split_whitespace().count() >= 3
                && SUBJECTS.contains(&first.trim_end_matches(','))
                && !REQUESTS.iter().any(|r| lower.starts_with(r))
        })
        .map(str::to_string)
        .collect()
}

/// The run's conversations (its sessions) in the order they were started.
async fn sessions(conversations: &RunConversations) -> Result<Vec<Conversation>> {
    let mut sessions = conversations.list().await?;
    sessions.sort_by_key(|c| c.created_at);
    Ok(sessions)
}

/// Writes the run's stored turns (every session, in the order they were started) as 2025 JSONL
/// lines (`run_type` automatic: the run's own ranking and responses); returns the line count.
pub async fn write_stored(
    store: &Store,
    user_id: i64,
    team_id: &str,
    run_id: &str,
    path: &std::path::Path,
) -> Result<usize> {
    let conversations = sessions(&store.run_conversations(user_id, run_id)).await?;
    let mut stored = Vec::with_capacity(conversations.len());
    for c in &conversations {
        stored.push(store.list_turns(user_id, c.id, false).await?);
    }
    let metadata = Ikat25Metadata {
        team_id: team_id.to_string(),
        run_id: run_id.to_string(),
        run_type: Ikat25RunType::Automatic,
    };
    let lines = super::ikat::render_2025(&metadata, true, PtkbList::Selected, &stored)?;
    let text = ikat25::render_jsonl(&lines)?;
    crate::formats::atomic::write_atomic(path, text.as_bytes())?;
    Ok(lines.len())
}

/// The `AssistantResponse` of a stored turn: its response, its ranking as citations (README:
/// "the (up to) top 1000 relevant passages given as their ids and their relevance score") and
/// the texts of the PTKB statements the turn selected.
pub fn assistant_response(run_id: &str, turn: &Turn) -> Value {
    let citations: Map<String, Value> = turn
        .passages
        .iter()
        .take(MAX_CITATIONS)
        .map(|p| (p.passage_id.clone(), json!(submitted_score(p.score))))
        .collect();
    let ptkb: Vec<&str> = turn
        .ptkb_ranking
        .iter()
        .filter(|s| s.selected)
        .map(|s| s.text.as_str())
        .collect();
    json!({
        "run_id": run_id,
        "response": turn.response_text.clone().unwrap_or_default(),
        "citations": citations,
        "ptkb_provenance": ptkb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Value {
        json!({
            "timestamp": "2026-01-01T00:00:00", "run_id": "r", "topic_id": "7-1",
            "user_id": "u1", "utterance": "And for dinner?",
            "history": [
                {"role": "user", "content": "Vegetarian lunch ideas?"},
                {"role": "assistant", "content": "Lentil soup."},
                {"role": "user", "content": "And for dinner?"}
            ],
            "last_response_of_session": false, "last_response_of_run": false
        })
    }

    #[test]
    fn remembers_first_person_statements_not_questions_or_requests() {
        assert_eq!(
            persona_statements(
                "I am vegetarian. I have two kids! What is a quick dinner? I'd like a soup. \
                 I see. My partner can’t eat nuts"
            ),
            [
                "I am vegetarian.",
                "I have two kids!",
                "My partner can't eat nuts"
            ]
        );
        assert!(persona_statements("Do I need to soak lentils? Thanks, that is all.").is_empty());
        assert!(persona_statements("I would like a meal plan.").is_empty());
    }

    #[test]
    fn parses_a_dump_in_either_layout_ordered_per_topic() {
        let record = |t: &str, u: &str, text: Value| {
            json!({"metadata": {"run_id": "r", "topic_id": t},
                   "responses": [{"rank": 1, "user_utterance": u, "text": text}]})
        };
        let lines = [
            record("1-1_2", "Bye.", Value::Null),
            record("1-1_1", "Hi?", json!("Hello.")),
        ];
        let ndjson = lines
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        let parsed = parse_dump("run/dump", &ndjson).unwrap();
        assert_eq!(
            parsed,
            parse_dump("run/dump", &json!(lines).to_string()).unwrap()
        );
        let topic = &parsed["1-1"];
        assert_eq!(topic[0].response.as_deref(), Some("Hello."));
        assert_eq!(
            (topic[1].turn_id.as_str(), topic[1].response.clone()),
            ("1-1_2", None)
        );
        let e = parse_dump("run/dump", &record("1-1", "Hi?", Value::Null).to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("record 1: metadata.topic_id is not"), "{e}");
    }

    #[test]
    fn parses_a_user_utterance_and_numbers_its_turn() {
        let u = UserUtterance::parse("run/continue", &message()).unwrap();
        assert_eq!(u.turn_id(), "7-1_1");
        assert_eq!(u.history.len(), 3);
    }

    #[test]
    fn names_endpoint_and_field_of_a_contract_violation() {
        let mut m = message();
        m["last_response_of_session"] = json!("no");
        let e = UserUtterance::parse("run/continue", &m)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "Sim.API run/continue: field last_response_of_session: not a boolean"
        );
        let mut m = message();
        m.as_object_mut().unwrap().remove("topic_id");
        let e = UserUtterance::parse("run/start", &m)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "Sim.API run/start: field topic_id: missing");
        let mut m = message();
        m["utterance"] = json!("something else");
        let e = UserUtterance::parse("run/start", &m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("field history"), "{e}");
    }
}
