//! `POST /v1/embeddings` over real HTTP with the real bi-encoder (all-MiniLM-L6-v2): OpenAI's
//! shape, the same vectors the model gives dense retrieval, base64 as float32s, refusals
//! naming the field, and the rate of searches.

use std::sync::Arc;

use convrag::api::{self, RunningServer};
use convrag::collection::Format;
use convrag::index::{index_collection, IndexOptions};
use convrag::rerank::Reranker;
use convrag::web::AppState;
use serde_json::{json, Value};

use crate::common::{self, new_user, Client, TestDb, ADMIN_TOKEN};
use crate::support::fixture;

const MODEL: &str = "all-MiniLM-L6-v2";

struct Setup {
    _db: TestDb,
    server: RunningServer,
    _home: tempfile::TempDir,
}

async fn setup(with_model: bool, searches_per_minute: u32) -> Setup {
    let db = TestDb::new().await;
    let home = tempfile::tempdir().unwrap();
    let mut config = db.config();
    config.home = home.path().to_path_buf();
    config.limits.searches_per_minute = searches_per_minute;
    let mut options = IndexOptions::new("diet", Format::Jsonl);
    options.inputs = vec![fixture("jsonl/diet.jsonl")];
    options.threads = 1;
    options.heap_bytes = 16 << 20;
    index_collection(&config.collections_dir(), &options).unwrap();
    let mut state = AppState::new(db.store.clone(), Arc::new(config), ADMIN_TOKEN);
    if with_model {
        state = state.with_reranker(Arc::new(common::default_model()));
    }
    Setup {
        server: api::spawn(state).unwrap(),
        _db: db,
        _home: home,
    }
}

fn floats(value: &Value) -> Vec<f32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect()
}

/// Decodes standard base64 (the test's own decoder, independent of the server's encoder).
fn base64_floats(text: &str) -> Vec<f32> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut bytes = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut n = 0u32;
        for (i, &c) in data.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        bytes.extend(n.to_be_bytes()[1..data.len()].iter().copied());
    }
    bytes
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_are_the_bi_encoders_vectors_in_openais_shape() {
    let s = setup(true, 0).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;

    // The embedding model is listed beside the collections, and readable by its id.
    let r = alice.get("/v1/models").await;
    let ids: Vec<&str> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["diet", MODEL], "{:?}", r.body);
    let r = alice.get(&format!("/v1/models/{MODEL}")).await;
    assert_eq!((r.status, r.body["id"].as_str()), (200, Some(MODEL)));

    let texts = ["lentil soup for a cold evening", "how long to boil an egg"];
    let r = alice
        .post(
            "/v1/embeddings",
            json!({"model": MODEL, "input": texts, "user": "someone"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["object"], "list");
    assert_eq!(r.body["model"], MODEL);
    assert!(r.body["usage"]["prompt_tokens"].as_u64().unwrap() >= 10);
    let data = r.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    let expected = common::default_model()
        .embed_queries(&texts)
        .unwrap()
        .unwrap();
    for (i, item) in data.iter().enumerate() {
        assert_eq!(
            (item["object"].as_str(), item["index"].as_u64()),
            (Some("embedding"), Some(i as u64))
        );
        let vector = floats(&item["embedding"]);
        assert_eq!(vector.len(), 384);
        for (a, b) in vector.iter().zip(&expected[i]) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    // One text, as base64: the same floats, bit for bit.
    let r = alice
        .post(
            "/v1/embeddings",
            json!({"model": MODEL, "input": texts[1], "encoding_format": "base64",
                "dimensions": 384}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let decoded = base64_floats(r.body["data"][0]["embedding"].as_str().unwrap());
    assert_eq!(decoded, floats(&data[1]["embedding"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_refusals_name_the_field_in_openais_shape() {
    let s = setup(true, 2).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let refused = |r: &common::Reply| {
        (
            r.status,
            r.body["error"]["param"].as_str().map(String::from),
            r.body["error"]["code"].as_str().map(String::from),
        )
    };
    let cases = [
        (
            json!({"model": "text-embedding-3-small", "input": "x"}),
            404,
            "model",
            "model_not_found",
        ),
        (
            json!({"model": MODEL, "input": [[1, 2, 3]]}),
            400,
            "input[0]",
            "invalid_field",
        ),
        (
            json!({"model": MODEL, "input": 42}),
            400,
            "input",
            "invalid_field",
        ),
        (
            json!({"model": MODEL, "input": []}),
            400,
            "input",
            "invalid_field",
        ),
        (
            json!({"model": MODEL, "input": ["soup", "  "]}),
            400,
            "input[1]",
            "invalid_field",
        ),
        (
            json!({"model": MODEL, "input": "x".repeat(20_001)}),
            400,
            "input[0]",
            "invalid_field",
        ),
        (
            json!({"model": MODEL, "input": "soup", "dimensions": 10}),
            400,
            "dimensions",
            "invalid_field",
        ),
        (
            json!({"model": MODEL, "input": "soup", "encoding_format": "int8"}),
            400,
            "encoding_format",
            "invalid_field",
        ),
    ];
    for (body, status, param, code) in cases {
        let r = alice.post("/v1/embeddings", body.clone()).await;
        assert_eq!(
            refused(&r),
            (status, Some(param.to_string()), Some(code.to_string())),
            "{body}: {:?}",
            r.body
        );
    }
    let bad = anon.with_token("not-a-token");
    let r = bad
        .post("/v1/embeddings", json!({"model": MODEL, "input": "soup"}))
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (401, Some("invalid_api_key"))
    );

    // Two searches a minute. Refusals of the request itself cost none; the dimensions check
    // follows the encoding, so that one counted: one more is answered, the next waits.
    let soup = json!({"model": MODEL, "input": "soup"});
    assert_eq!(alice.post("/v1/embeddings", soup.clone()).await.status, 200);
    let r = alice.post("/v1/embeddings", soup).await;
    assert_eq!(
        refused(&r),
        (429, None, Some("rate_limited".to_string())),
        "{:?}",
        r.body
    );
}

#[tokio::test]
async fn without_a_bi_encoder_there_is_no_embedding_model() {
    let s = setup(false, 0).await;
    let anon = Client::new(&s.server, None);
    let alice = new_user(&anon, "alice").await;
    let r = alice
        .post("/v1/embeddings", json!({"model": MODEL, "input": "soup"}))
        .await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (404, Some("model")),
        "{:?}",
        r.body
    );
    let r = alice.get("/v1/models").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1, "{:?}", r.body);
}
