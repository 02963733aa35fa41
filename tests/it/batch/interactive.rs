//! `convrag ikat interactive` against a local server written here that follows the Simulation
//! API's documented contract (`marcel-gohsen/user-simulation-api`: `README.md`,
//! `src/api/run_router.py`, `src/api/messages.py`): bearer auth, `run/start` (412 for a known
//! run), `run/continue` (the next topic after a session's end, 428 once the run is complete),
//! `run/session` (fails when no session is open, as the router reading a missing session does).
//! Its users and topics are made up; their utterances are scripted. A real collection
//! (tests/fixtures/jsonl/diet.jsonl) answers through the turn pipeline.

use std::sync::{Arc, Mutex};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::{json, Value};

use crate::batch_support::{s, Env};
use crate::support::fixture;

const TOKEN: &str = "made-up-token";
const TEAM: &str = "made-up-team";

/// A scripted session: (topic id, user id, utterances); the last one ends the session.
type Session = (&'static str, &'static str, Vec<&'static str>);

/// The scripted sessions of the run.
fn script() -> Vec<Session> {
    vec![
        (
            "1-1",
            "user-a",
            vec![
                "What is a quick vegetarian dinner?",
                "How long do red lentils take to cook?",
                "Thanks, that is all.",
            ],
        ),
        (
            "2-1",
            "user-b",
            vec!["Give me a meat-free meal plan for a week.", "Great, bye."],
        ),
    ]
}

#[derive(Default)]
struct Sim {
    script: Vec<Session>,
    run_id: Option<String>,
    /// Index of the open session and its history; `None` between sessions.
    open: Option<(usize, Vec<Value>)>,
    next_session: usize,
    complete: bool,
    /// (method and path, body) of every request, in order.
    log: Vec<(String, Value)>,
    /// Answers to give instead, once each, to the n-th `run/continue` (1-based).
    fail_continue: Vec<(usize, u16)>,
    continues: usize,
    /// What `run/dump` reports, per answered or session-ending utterance (`trec_run.py`):
    /// (topic id, user utterance, response or null, citations, ptkb_provenance).
    recorded: Vec<(String, String, Value, Value, Value)>,
    /// `run/dump` reports this response instead of the first one recorded.
    altered_response: Option<String>,
}

type Shared = Arc<Mutex<Sim>>;

fn shared(script: Vec<Session>) -> Shared {
    Arc::new(Mutex::new(Sim {
        script,
        ..Sim::default()
    }))
}

fn detail(status: u16, text: &str) -> HttpResponse {
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap())
        .json(json!({"detail": text}))
}

fn message(sim: &Sim, utterance: &str, end_session: bool, end_run: bool) -> HttpResponse {
    let (i, history) = sim.open.as_ref().unwrap();
    HttpResponse::Ok().json(json!({
        "timestamp": "2026-11-26T12:00:00", "run_id": sim.run_id, "topic_id": sim.script[*i].0,
        "user_id": sim.script[*i].1, "utterance": utterance,
        "history": history, "last_response_of_session": end_session, "last_response_of_run": end_run,
    }))
}

/// Opens the next session; its first utterance.
fn open_next(sim: &mut Sim) -> Option<String> {
    let i = sim.next_session;
    let first = sim.script.get(i)?.2[0].to_string();
    sim.next_session += 1;
    sim.open = Some((i, vec![json!({"role": "user", "content": first})]));
    Some(first)
}

/// The `AssistantResponse` checks of `messages.py`: types, the 250-token response limit.
fn check_response(body: &Value) -> Result<(), String> {
    if !body["run_id"].is_string() || !body["response"].is_string() {
        return Err("run_id and response must be strings".into());
    }
    if body["response"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .count()
        > 250
    {
        return Err("Response exceeds limit of 250 tokens.".into());
    }
    match &body["citations"] {
        Value::Null => {}
        Value::Object(m) if m.values().all(Value::is_number) => {}
        _ => return Err("citations: a map of passage id to score".into()),
    }
    match &body["ptkb_provenance"] {
        Value::Null => Ok(()),
        Value::Array(a) if a.iter().all(Value::is_string) => Ok(()),
        _ => Err("ptkb_provenance: a list of strings".into()),
    }
}

fn handle(sim: &mut Sim, route: &str, query: &str, body: Value) -> HttpResponse {
    match route {
        "GET /auth/verify" => HttpResponse::Ok().json(json!({"team_id": TEAM})),
        "POST /run/start" => {
            if sim.run_id.is_some() {
                return detail(412, "Active run with the name already exists");
            }
            if !body["run_id"].is_string()
                || !body["description"].is_string()
                || !body["track_persona"].is_boolean()
            {
                return detail(422, "RunMeta: run_id, description, track_persona");
            }
            sim.run_id = body["run_id"].as_str().map(str::to_string);
            let first = open_next(sim).unwrap();
            message(sim, &first, false, false)
        }
        "POST /run/continue" => {
            sim.continues += 1;
            let n = sim.continues;
            if let Some(k) = sim.fail_continue.iter().position(|(at, _)| *at == n) {
                let (_, status) = sim.fail_continue.remove(k);
                return detail(status, "made-up outage");
            }
            if let Err(e) = check_response(&body) {
                return detail(422, &e);
            }
            if sim.complete || body["run_id"].as_str() != sim.run_id.as_deref() {
                return detail(428, "Run does not exist or was completed.");
            }
            let Some((i, mut history)) = sim.open.take() else {
                let Some(first) = open_next(sim) else {
                    return detail(400, "No more open topics. Run was finished!");
                };
                return message(sim, &first, false, false);
            };
            let topic = sim.script[i].0.to_string();
            let answered = history.last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string();
            sim.recorded.push((
                topic.clone(),
                answered,
                body["response"].clone(),
                body["citations"].clone(),
                body["ptkb_provenance"].clone(),
            ));
            history.push(json!({"role": "assistant", "content": body["response"]}));
            let asked = history.iter().filter(|m| m["role"] == "user").count();
            let utterances = sim.script[i].2.clone();
            let next = utterances[asked].to_string();
            history.push(json!({"role": "user", "content": next}));
            let end = asked + 1 == utterances.len();
            let end_run = end && i + 1 == sim.script.len();
            if end {
                let none = (Value::Null, json!({}), json!([]));
                sim.recorded
                    .push((topic, next.clone(), none.0, none.1, none.2));
            }
            sim.open = Some((i, history));
            let reply = message(sim, &next, end, end_run);
            if end {
                sim.open = None;
                sim.complete = end_run;
            }
            reply
        }
        "GET /run/status" => {
            let done = if sim.complete {
                sim.script.len()
            } else {
                sim.next_session - usize::from(sim.open.is_some())
            };
            let topics: Vec<&str> = sim.script.iter().map(|t| t.0).collect();
            HttpResponse::Ok().json(json!({
                "status": if sim.complete { "complete" } else { "active" },
                "open_topics": topics[done..], "done_topics": topics[..done],
            }))
        }
        "GET /run/session" => {
            if sim.complete || query != format!("run_id={}", sim.run_id.clone().unwrap_or_default())
            {
                return detail(428, "Run does not exist or was completed.");
            }
            match &sim.open {
                Some((_, h)) => {
                    let last = h.last().unwrap()["content"].as_str().unwrap().to_string();
                    message(sim, &last, false, false)
                }
                // run_router.py reads the missing session's fields: an internal error.
                None => HttpResponse::InternalServerError().body("Internal Server Error"),
            }
        }
        "GET /run/dump" => {
            if query != format!("run_id={}", sim.run_id.clone().unwrap_or_default()) {
                return detail(404, "Run does not exist.");
            }
            HttpResponse::Ok()
                .content_type("application/x-ndjson")
                .body(dump(sim))
        }
        _ => HttpResponse::NotFound().finish(),
    }
}

/// `run/dump` as `trec_run.py` writes it: one line per recorded utterance, numbered per topic
/// from 1.
fn dump(sim: &Sim) -> String {
    let mut lines = Vec::new();
    for (k, (topic, utterance, response, citations, ptkb)) in sim.recorded.iter().enumerate() {
        let n = sim.recorded[..=k].iter().filter(|r| r.0 == *topic).count();
        let text = match (&sim.altered_response, k) {
            (Some(altered), 0) => json!(altered),
            _ => response.clone(),
        };
        let metadata = json!({
            "team_id": TEAM, "run_id": sim.run_id, "type": "interactive",
            "description": "made up", "track_persona": 0, "topic_id": format!("{topic}_{n}"),
        });
        let record = json!({
            "metadata": metadata,
            "responses": [{"rank": 1, "user_utterance": utterance, "text": text,
                           "citations": citations, "ptkb_provenance": ptkb}],
            "references": citations,
        });
        lines.push(record.to_string());
    }
    lines.join("\n")
}

fn sim_api(sim: Shared) -> String {
    let server = HttpServer::new(move || {
        let sim = sim.clone();
        App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
            let sim = sim.clone();
            async move {
                let route = format!("{} {}", req.method(), req.path());
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut sim = sim.lock().unwrap();
                sim.log.push((route.clone(), body.clone()));
                let auth = req
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok());
                if auth != Some(&format!("Bearer {TOKEN}")) {
                    return detail(401, "Invalid token");
                }
                handle(&mut sim, &route, req.query_string(), body)
            }
        }))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")
    .unwrap();
    let addr = server.addrs()[0];
    tokio::spawn(server.run());
    format!("http://{addr}")
}

async fn convrag(env: &Env, args: Vec<String>) -> std::process::Output {
    let cmd = tokio::process::Command::from(env.cmd())
        .args(&args)
        .output()
        .await
        .unwrap();
    cmd
}

fn routes(log: &[(String, Value)]) -> Vec<&str> {
    log.iter().map(|(r, _)| r.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_simulated_users_and_resumes_without_replaying_sessions() {
    let env = Env::new(false).await;
    env.index("diet", "jsonl", &fixture("jsonl/diet.jsonl"), None);
    let sim = shared(script());
    // The 2nd continue fails once with a 503 (retried); the 5th with a 400 (the run stops).
    sim.lock().unwrap().fail_continue = vec![(2, 503), (5, 400)];
    let api = sim_api(sim.clone());
    let output = env.path("interactive.jsonl");
    let args: Vec<String> = [
        "ikat",
        "interactive",
        "--api",
        &api,
        "--token",
        TOKEN,
        "--team-id",
        TEAM,
        "--run-id",
        "made-up-run",
        "--collection",
        "diet",
        "--passages",
        "3",
        "--output",
        s(&output),
        "--quiet",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();

    let first = convrag(&env, args.clone()).await;
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(!first.status.success(), "the 400 stops the run: {stderr}");
    assert!(
        stderr.contains("Sim.API run/continue: HTTP 400: made-up outage"),
        "{stderr}"
    );
    let log = sim.lock().unwrap().log.clone();
    let ids: Vec<String> = std::fs::read_to_string(fixture("jsonl/diet.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        routes(&log),
        [
            "GET /auth/verify",
            "POST /run/start",
            "GET /run/status",
            "POST /run/continue",
            "POST /run/continue",
            "POST /run/continue",
            "POST /run/continue",
            "POST /run/continue",
        ]
    );
    assert_eq!(
        log[1].1,
        json!({"run_id": "made-up-run", "description": log[1].1["description"], "track_persona": false, "team_id": TEAM})
    );
    assert!(log[1].1["description"]
        .as_str()
        .is_some_and(|d| !d.is_empty()));
    // The retried request is the same request.
    assert_eq!(log[4].1, log[5].1);
    for i in [3, 4, 7] {
        let body = &log[i].1;
        assert_eq!(body["run_id"], "made-up-run");
        assert!(!body["response"].as_str().unwrap().is_empty(), "{body}");
        let citations = body["citations"].as_object().unwrap();
        assert!(!citations.is_empty() && citations.len() <= 3, "{body}");
        assert!(citations.keys().all(|k| ids.contains(k)), "{body}");
        assert_eq!(body["ptkb_provenance"], json!([]));
    }
    // After the user ended session 1-1: an empty response, which opens topic 2-1.
    assert_eq!(log[6].1, json!({"run_id": "made-up-run", "response": ""}));
    assert_eq!(env.stored_turns("made-up-run").await, 3);

    // Resumed: the API knows the run (412), its open session waits on the stored turn of 2-1,
    // which is sent as stored; session 1-1 is not asked for again.
    let second = convrag(&env, args).await;
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 sessions ended, 0 turns computed, 1 stored turns sent (resumed)"),
        "{stderr}"
    );
    let log = sim.lock().unwrap().log.clone();
    assert_eq!(
        routes(&log[8..]),
        [
            "GET /auth/verify",
            "POST /run/start",
            "GET /run/session",
            "GET /run/status",
            "POST /run/continue",
            "GET /run/dump",
        ]
    );
    assert!(
        stderr.contains("run/dump matches the 3 stored turns"),
        "{stderr}"
    );
    assert_eq!(log[12].1, log[7].1, "the stored answer is sent unchanged");
    assert!(sim.lock().unwrap().complete);
    assert_eq!(env.stored_turns("made-up-run").await, 3);

    // The output holds the three turns, numbered as run/dump numbers them.
    let lines: Vec<Value> = env
        .read("interactive.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["turn_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1-1_0", "1-1_1", "2-1_0"]);
    assert_eq!(lines[2]["responses"][0]["text"], log[12].1["response"]);
}

fn run_args(api: &str, run_id: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "ikat",
        "interactive",
        "--api",
        api,
        "--token",
        TOKEN,
        "--run-id",
        run_id,
        "--collection",
        "diet",
        "--passages",
        "3",
        "--quiet",
    ];
    args.extend(extra);
    args.iter().map(|a| a.to_string()).collect()
}

/// The current PTKB statement texts of the run's conversation of `topic`.
async fn ptkb_of(env: &Env, run_id: &str, topic: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT p.text FROM ptkb_statements p JOIN conversations c ON c.id = p.conversation_id \
         WHERE c.external_id LIKE $1 AND p.hidden_from_seq IS NULL ORDER BY p.id",
    )
    .bind(format!("{run_id}/{topic}/%"))
    .fetch_all(env.db.store.pool())
    .await
    .unwrap()
}

/// The statements in the PTKB ranking of the turn `turn_id` of the run, with `selected`.
async fn ranking_of(env: &Env, run_id: &str, turn_id: &str) -> Vec<(String, bool)> {
    sqlx::query_as(
        "SELECT p.text, r.selected FROM turn_ptkb_rankings r \
         JOIN ptkb_statements p ON p.id = r.statement_row \
         JOIN turns t ON t.id = r.turn_id JOIN conversations c ON c.id = t.conversation_id \
         WHERE c.external_id LIKE $1 || '/%' AND t.external_turn_id = $2 AND t.is_current \
         ORDER BY r.rank",
    )
    .bind(run_id)
    .bind(turn_id)
    .fetch_all(env.db.store.pool())
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembers_what_a_returning_user_said_about_themselves() {
    let env = Env::new(false).await;
    env.index("diet", "jsonl", &fixture("jsonl/diet.jsonl"), None);
    let sim = shared(vec![
        (
            "1-1",
            "user-a",
            vec![
                "I am vegetarian. I'd like a quick dinner idea.",
                "I have two kids. How long do red lentils take to cook?",
                "Thanks, that is all.",
            ],
        ),
        (
            "2-1",
            "user-b",
            vec!["What is a quick vegetarian dinner?", "Great, bye."],
        ),
        (
            "3-1",
            "user-a",
            vec!["Which lentil dinner suits a vegetarian family?", "Bye."],
        ),
    ]);
    let api = sim_api(sim.clone());
    let run = "made-up-persona-run";
    let out = convrag(&env, run_args(&api, run, &["--track-persona"])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("run/dump matches the 4 stored turns"),
        "{stderr}"
    );
    let log = sim.lock().unwrap().log.clone();
    assert_eq!(log[0].0, "POST /run/start");
    assert_eq!(log[0].1["track_persona"], json!(true));

    // User A's first session starts with nothing; user B never sees A's statements; A's later
    // session starts with both statements A made (not the request, not the questions).
    assert!(ptkb_of(&env, run, "1-1").await.is_empty());
    assert!(ptkb_of(&env, run, "2-1").await.is_empty());
    let remembered = ["I am vegetarian.", "I have two kids."];
    assert_eq!(ptkb_of(&env, run, "3-1").await, remembered);
    let ranking = ranking_of(&env, run, "3-1_0").await;
    let ranked: Vec<&str> = ranking.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(ranked.len(), 2, "{ranking:?}");
    assert!(remembered.iter().all(|r| ranked.contains(r)), "{ranking:?}");
    assert!(ranking_of(&env, run, "2-1_0").await.is_empty());

    // The 3-1 turn's answer names the statements the turn selected as ptkb_provenance.
    let selected: Vec<&str> = ranking
        .iter()
        .filter(|(_, s)| *s)
        .map(|(t, _)| t.as_str())
        .collect();
    let answers: Vec<&Value> = log
        .iter()
        .filter(|(r, b)| r == "POST /run/continue" && b["response"] != "")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(answers.len(), 4);
    // The utterance asks for a vegetarian dinner: the turn selects that statement.
    assert!(selected.contains(&"I am vegetarian."), "{ranking:?}");
    assert_eq!(answers[3]["ptkb_provenance"], json!(selected));
    assert_eq!(answers[2]["ptkb_provenance"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_that_differs_from_the_stored_turns_is_an_error_naming_the_turn() {
    let env = Env::new(false).await;
    env.index("diet", "jsonl", &fixture("jsonl/diet.jsonl"), None);
    let sim = shared(script());
    sim.lock().unwrap().altered_response = Some("Something convrag never said.".into());
    let api = sim_api(sim.clone());
    let out = convrag(&env, run_args(&api, "made-up-run", &[])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "Sim.API run/dump: topic 1-1: turn 1-1_0 (dump 1-1_1): the response differs: \
             dump Some(\"Something convrag never said.\"), stored "
        ),
        "{stderr}"
    );
    let log = sim.lock().unwrap().log.clone();
    assert_eq!(log.last().unwrap().0, "GET /run/dump");
    assert!(sim.lock().unwrap().complete);
    assert_eq!(env.stored_turns("made-up-run").await, 3);
}
