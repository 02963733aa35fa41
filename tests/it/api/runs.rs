//! The Runs view's API over real HTTP and PostgreSQL: two iKAT runs made by `convrag run … --user`
//! over the batch fixture collection (BM25, automatic and manual rewrites), judgments uploaded as
//! TREC qrels text; the measures equal `convrag eval ranking` and `convrag eval compare` on the
//! runs' TREC files, and another user sees none of it.

use serde_json::Value;

use crate::batch_support::{s, Env};
use crate::common::Client;
use crate::support::fixture;

const MEASURES: &[&str] = &["ndcg_cut_3", "ndcg_cut_10", "P_10", "recall_100", "map"];

/// `convrag run ikat` over the fixture topics for `user`, writing `<name>.json` and `<name>.trec`.
fn run(env: &Env, name: &str, run_type: &str, user: Option<&str>) -> std::process::Output {
    let topics = fixture("ikat/topics_2023.json");
    let (output, trec) = (format!("{name}.json"), format!("{name}.trec"));
    let mut args = vec![
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "ikat-fixture",
        "--run-type",
        run_type,
        "--stages",
        "ptkb,rewrite,retrieve",
        "--depth",
        "10",
        "--passages",
        "10",
        "--run-name",
        name,
        "--output",
        &output,
        "--trec-output",
        &trec,
        "--quiet",
    ];
    if let Some(user) = user {
        args.extend(["--user", user]);
    }
    env.convrag(&args)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[tokio::test]
async fn runs_are_measured_and_compared_per_turn_and_stay_private() {
    let env = Env::new(false).await;
    env.index(
        "ikat-fixture",
        "ikat-passages",
        &fixture("ikat/passages.jsonl"),
        None,
    );
    let store = &env.db.store;
    let (_, alice_token) = store.create_user("alice").await.unwrap();
    let (_, bob_token) = store.create_user("bob").await.unwrap();

    // A user who does not exist is refused, naming the option; nothing is stored.
    let refused = run(&env, "nobody-run", "automatic", Some("carol"));
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--user") && stderr.contains("carol"),
        "{stderr}"
    );

    for (name, run_type) in [("auto", "automatic"), ("manual", "manual")] {
        let o = run(&env, name, run_type, Some("alice"));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The default owner is still the `batch` user.
    let o = run(&env, "batch-owned", "automatic", None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let server = env.db.serve();
    let anon = Client::new(&server, None);
    let alice = anon.with_token(&alice_token);
    let bob = anon.with_token(&bob_token);

    let runs = alice.get("/v1/runs").await;
    assert_eq!(runs.status, 200, "{:?}", runs.body);
    let mut listed: Vec<(String, i64, i64, String)> = runs.body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["topics"].as_i64().unwrap(),
                r["turns"].as_i64().unwrap(),
                r["task"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("auto".into(), 2, 5, "ikat".into()),
            ("manual".into(), 2, 5, "ikat".into())
        ]
    );

    // Judgments: bad text is refused naming the line, then the fixture's are stored.
    let bad = alice
        .raw(
            "PUT",
            "/v1/qrels/fixture",
            "text/plain",
            b"1-1_1 0 a 1\n1-1_1 0 b high\n".to_vec(),
        )
        .await;
    assert_eq!(
        (bad.status, bad.code(), bad.field()),
        (400, "invalid_field", "body")
    );
    assert!(bad.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("line 2"));
    let bad_name = alice
        .raw(
            "PUT",
            "/v1/qrels/..bad",
            "text/plain",
            b"1 0 a 1\n".to_vec(),
        )
        .await;
    assert_eq!((bad_name.status, bad_name.field()), (400, "name"));
    let qrels_text = std::fs::read(fixture("ikat/qrels.txt")).unwrap();
    let put = alice
        .raw("PUT", "/v1/qrels/fixture", "text/plain", qrels_text)
        .await;
    assert_eq!(put.status, 200, "{:?}", put.body);
    assert_eq!(put.body["qrels"]["queries"], 5);
    assert_eq!(put.body["qrels"]["judgments"], 12);
    let listed = alice.get("/v1/qrels").await;
    assert_eq!(listed.body["qrels"][0]["name"], "fixture");

    // One run: the summary is `convrag eval ranking` on the run's TREC file.
    let report = alice.get("/v1/runs/auto?qrels=fixture").await;
    assert_eq!(report.status, 200, "{:?}", report.body);
    let qrels_path = fixture("ikat/qrels.txt");
    let trec = env.path("auto.trec");
    let mut args = vec![
        "eval",
        "ranking",
        "--qrels",
        s(&qrels_path),
        "--run",
        s(&trec),
    ];
    for m in ["ndcg_cut.3", "ndcg_cut.10", "P.10", "recall.100", "map"] {
        args.extend(["-m", m]);
    }
    args.push("--json");
    let o = env.cmd().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cli: Value = serde_json::from_slice(&o.stdout).unwrap();
    for m in MEASURES {
        let api = report.body["summary"][m].as_f64().unwrap();
        let expected = cli["all"][m].as_f64().unwrap();
        assert!(close(api, expected), "{m}: API {api}, eval {expected}");
    }
    let turns = report.body["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 5);
    for turn in turns {
        let qid = turn["turn_id"].as_str().unwrap();
        assert_eq!(turn["judged"], true);
        for m in MEASURES {
            let api = turn["measures"][m].as_f64().unwrap();
            let expected = cli["per_query"][qid][m].as_f64().unwrap();
            assert!(
                close(api, expected),
                "{qid} {m}: API {api}, eval {expected}"
            );
        }
        assert!(turn["rewrite"].as_str().is_some_and(|r| !r.is_empty()));
        assert!(!turn["passages"].as_array().unwrap().is_empty());
    }
    // The first turn of topic 1-1: its selected PTKB statements and the grade of a judged passage.
    let first = &turns[0];
    assert_eq!(first["turn_id"], "1-1_1");
    // The selected statements, as the run stored them (the calibrated ranker may select none).
    assert!(
        first["ptkb"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.is_string() || p.is_object()),
        "{first}"
    );
    let graded: Vec<(&str, i64)> = first["passages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["passage_id"].as_str()?, p["grade"].as_i64()?)))
        .collect();
    assert!(
        graded.contains(&("clueweb22-en0001-00-00001:0", 2)),
        "{graded:?}"
    );

    // Two runs: the means, p-values and per-turn differences of `convrag eval compare`.
    let comparison = alice
        .get("/v1/runs/compare?a=auto&b=manual&qrels=fixture&measure=ndcg_cut.10")
        .await;
    assert_eq!(comparison.status, 200, "{:?}", comparison.body);
    let c = &comparison.body;
    let json_path = env.path("compare.json");
    let o = env
        .cmd()
        .args([
            "eval",
            "compare",
            "--qrels",
            s(&qrels_path),
            "--run",
            s(&env.path("auto.trec")),
            "--run",
            s(&env.path("manual.trec")),
            "-m",
            "ndcg_cut.10",
            "--json",
            s(&json_path),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cli: Value = serde_json::from_str(&env.read("compare.json")).unwrap();
    let m = &cli["measures"][0];
    let pair = &m["pairs"][0];
    let (name_a, name_b) = (pair["a"].as_str().unwrap(), pair["b"].as_str().unwrap());
    assert_eq!(c["measure"], "ndcg_cut_10");
    assert!(close(
        c["mean_a"].as_f64().unwrap(),
        m["means"][name_a].as_f64().unwrap()
    ));
    assert!(close(
        c["mean_b"].as_f64().unwrap(),
        m["means"][name_b].as_f64().unwrap()
    ));
    assert_eq!(c["t_test_p"], pair["t_test_p"]);
    assert_eq!(c["randomization_p"], pair["randomization_p"]);
    assert_eq!(c["wins"], pair["wins"]);
    assert_eq!(c["losses"], pair["losses"]);
    let mut differing = 0;
    for turn in c["turns"].as_array().unwrap() {
        let qid = turn["turn_id"].as_str().unwrap();
        let delta = pair["deltas"][qid].as_f64().unwrap();
        assert!(close(turn["difference"].as_f64().unwrap(), delta), "{qid}");
        let (a, b) = (&turn["a"], &turn["b"]);
        assert!(
            a["rewrite"].is_string() && b["rewrite"].is_string(),
            "{turn}"
        );
        assert!(a["passages"].is_array() && b["passages"].is_array());
        if a["rewrite"] != b["rewrite"] {
            differing += 1;
        }
    }
    // Manual runs use the given rewrites, so some turns are rewritten differently.
    assert!(differing > 0, "{c}");

    // A run compared with itself: every judged turn a tie, nothing to test.
    let same = alice
        .get("/v1/runs/compare?a=auto&b=auto&qrels=fixture&measure=ndcg_cut.10")
        .await;
    assert_eq!(same.status, 200, "{:?}", same.body);
    let judged = same.body["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["judged"] == true)
        .count();
    assert!(judged > 0, "{}", same.body);
    assert_eq!(
        (&same.body["wins"], &same.body["losses"], &same.body["ties"]),
        (
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(judged)
        ),
        "{}",
        same.body
    );
    assert_eq!(same.body["mean_difference"], 0.0);
    assert_eq!(same.body["mean_a"], same.body["mean_b"]);
    assert_eq!(same.body["randomization_p"], 1.0);
    assert!(same.body["t_test_p"].is_null(), "{}", same.body);

    // Bad parameters name the field.
    for (path, field) in [
        (
            "/v1/runs/compare?a=auto&b=manual&qrels=fixture&measure=ndcg_cut",
            "measure",
        ),
        (
            "/v1/runs/compare?a=auto&b=manual&qrels=fixture&measure=ndcg_cut.010",
            "measure",
        ),
        ("/v1/runs/compare?a=auto&qrels=fixture", "b"),
        ("/v1/runs/auto", "qrels"),
    ] {
        let r = alice.get(path).await;
        assert_eq!((r.status, r.field()), (400, field), "{path}: {:?}", r.body);
    }
    for (path, field) in [
        ("/v1/runs/nope?qrels=fixture", "run"),
        ("/v1/runs/auto?qrels=nope", "qrels"),
        ("/v1/runs/compare?a=nope&b=manual&qrels=fixture", "a"),
    ] {
        let r = alice.get(path).await;
        assert_eq!(
            (r.status, r.code(), r.field()),
            (404, "not_found", field),
            "{path}"
        );
    }

    // Another user sees neither the runs nor the judgments, and the `batch` user's run is
    // nobody's here.
    let theirs = bob.get("/v1/runs").await;
    assert_eq!(theirs.body["runs"], serde_json::json!([]));
    assert_eq!(
        bob.get("/v1/qrels").await.body["qrels"],
        serde_json::json!([])
    );
    let r = bob.get("/v1/runs/auto?qrels=fixture").await;
    assert_eq!((r.status, r.field()), (404, "run"));
    let r = bob
        .get("/v1/runs/compare?a=auto&b=manual&qrels=fixture")
        .await;
    assert_eq!((r.status, r.field()), (404, "a"));
    // Bob's own judgments of the same name do not make Alice's runs visible.
    let put = bob
        .raw(
            "PUT",
            "/v1/qrels/fixture",
            "text/plain",
            b"1-1_1 0 x 1\n".to_vec(),
        )
        .await;
    assert_eq!(put.status, 200);
    let r = bob.get("/v1/runs/auto?qrels=fixture").await;
    assert_eq!(r.status, 404);
    let still = alice.get("/v1/qrels").await;
    assert_eq!(still.body["qrels"][0]["judgments"], 12);

    // Bob's own run may have the same name as Alice's: each sees only their own.
    let o = run(&env, "auto", "manual", Some("bob"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rewrites = |report: &Value| -> Vec<Value> {
        report["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["rewrite"].clone())
            .collect()
    };
    let bobs = bob.get("/v1/runs/auto?qrels=fixture").await;
    assert_eq!(bobs.status, 200, "{:?}", bobs.body);
    let manual = alice.get("/v1/runs/manual?qrels=fixture").await;
    assert_eq!(rewrites(&bobs.body), rewrites(&manual.body));
    assert_eq!(bobs.body["judged_turns"], 1);
    let alices = alice.get("/v1/runs/auto?qrels=fixture").await;
    assert_eq!(rewrites(&alices.body), rewrites(&report.body));
    assert_eq!(alices.body["summary"], report.body["summary"]);

    // Deleting a run takes its conversations with it; another user's of that name stays.
    let topics = |client: &Client| {
        let client = client.with_token(client.token.as_deref().unwrap());
        async move {
            let r = client.get("/v1/conversations").await;
            r.body["conversations"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["external_id"].as_str().map(str::to_string))
                .filter(|id| id.starts_with("auto/"))
                .count()
        }
    };
    assert_eq!(topics(&alice).await, 2);
    let r = alice.send("DELETE", "/v1/runs/auto", None).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(topics(&alice).await, 0);
    let r = alice.get("/v1/runs/auto?qrels=fixture").await;
    assert_eq!((r.status, r.field()), (404, "run"));
    let r = alice.send("DELETE", "/v1/runs/auto", None).await;
    assert_eq!((r.status, r.field()), (404, "run"));
    let listed = alice.get("/v1/runs").await;
    let names: Vec<&str> = listed.body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["manual"]);
    assert_eq!(topics(&bob).await, 2);
    assert_eq!(bob.get("/v1/runs/auto?qrels=fixture").await.status, 200);
    server.stop().await;
}
