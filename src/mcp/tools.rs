//! The MCP tools. A tool that fails on its input answers with `isError` and a message naming the
//! argument, so the calling model can correct itself; an unknown tool is a protocol error.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{RpcError, INVALID_PARAMS};
use crate::dense::Retrieval;
use crate::service::chat::{answer, ChatTurnRequest, IncomingMessage};
use crate::service::conversations::ConversationError;
use crate::service::SearchRequest;
use crate::store::{NewStatement, StoreError, User};
use crate::web::error::{ApiError, ErrorCode};
use crate::web::extract::{parse_json, parse_uuid};
use crate::web::AppState;

/// The tools with their input schemas and the schemas of the structured content they return
/// (`tools/list`; clients validate results against `outputSchema`).
pub fn definitions() -> Value {
    let conversation_id =
        json!({"type": "string", "description": "id of one of your conversations"});
    let outputs = output_schemas();
    json!([
        {"name": "search", "title": "Search a collection",
         "description": "Search of a passage collection (BM25, the bi-encoder over its passage vectors, or both fused); returns the top passages with ids, titles, URLs and text.",
         "inputSchema": {"type": "object", "required": ["collection", "query"], "additionalProperties": false,
            "properties": {"collection": {"type": "string"}, "query": {"type": "string"},
                "k": {"type": "integer", "minimum": 1, "maximum": SearchRequest::MAX_K, "default": 5},
                "retrieval": {"type": "string", "enum": ["bm25", "dense", "hybrid"], "default": "bm25"}}}},
        {"name": "ask", "title": "Ask (run a conversation turn)",
         "description": "Answers a question from a collection, personalized by the conversation's PTKB, with [n] citation markers and the cited passages. Without conversation_id a new conversation is started on `collection` (its PTKB starts as your profile); pass the returned conversation_id to continue it.",
         "inputSchema": {"type": "object", "required": ["question"], "additionalProperties": false,
            "properties": {"question": {"type": "string"}, "collection": {"type": "string"},
                "conversation_id": conversation_id}}},
        {"name": "list_ptkb", "title": "List PTKB statements",
         "description": "The statements about you (PTKB) the next turn of a conversation sees.",
         "inputSchema": {"type": "object", "required": ["conversation_id"], "additionalProperties": false,
            "properties": {"conversation_id": conversation_id}}},
        {"name": "add_ptkb", "title": "Add a PTKB statement",
         "description": "Adds a statement about you to a conversation's PTKB, used from its next turn on.",
         "inputSchema": {"type": "object", "required": ["conversation_id", "text"], "additionalProperties": false,
            "properties": {"conversation_id": conversation_id, "text": {"type": "string"}}}},
        {"name": "remove_ptkb", "title": "Remove a PTKB statement",
         "description": "Removes a statement from a conversation's PTKB from its next turn on.",
         "inputSchema": {"type": "object", "required": ["conversation_id", "statement_id"], "additionalProperties": false,
            "properties": {"conversation_id": conversation_id, "statement_id": {"type": "string"}}}},
        {"name": "list_profile", "title": "List profile statements",
         "description": "Your profile: statements about you copied into the PTKB of every new conversation.",
         "inputSchema": {"type": "object", "additionalProperties": false, "properties": {}}},
        {"name": "add_profile", "title": "Add a profile statement",
         "description": "Adds a statement to your profile (used by conversations started from now on).",
         "inputSchema": {"type": "object", "required": ["text"], "additionalProperties": false,
            "properties": {"text": {"type": "string"}}}},
        {"name": "remove_profile", "title": "Remove a profile statement",
         "description": "Removes a statement from your profile.",
         "inputSchema": {"type": "object", "required": ["id"], "additionalProperties": false,
            "properties": {"id": {"type": "integer"}}}},
    ])
    .as_array()
    .into_iter()
    .flatten()
    .map(|tool| {
        let mut tool = tool.clone();
        let name = tool["name"].as_str().unwrap_or_default().to_string();
        tool["outputSchema"] = outputs[name.as_str()].clone();
        tool
    })
    .collect()
}

/// The schema of each tool's structured content, by tool name.
fn output_schemas() -> Value {
    let object = |required: Value, properties: Value| json!({"type": "object", "required": required, "properties": properties});
    let text_or_null = json!({"type": ["string", "null"]});
    let number_or_null = json!({"type": ["number", "null"]});
    let ptkb_statement = object(
        json!(["id", "text", "visible_from_turn"]),
        json!({"id": {"type": "string"}, "text": {"type": "string"},
            "visible_from_turn": {"type": "integer"},
            "hidden_from_turn": {"type": ["integer", "null"]}, "created_at": {"type": "string"}}),
    );
    let profile_statement = object(
        json!(["id", "text"]),
        json!({"id": {"type": "integer"}, "text": {"type": "string"},
            "created_at": {"type": "string"}}),
    );
    let search_result = object(
        json!(["rank", "id", "score", "text"]),
        json!({"rank": {"type": "integer", "minimum": 1}, "id": {"type": "string"},
            "score": {"type": "number"}, "bm25_score": number_or_null,
            "rerank_score": number_or_null, "title": text_or_null, "url": text_or_null,
            "text": {"type": "string"}}),
    );
    let cited_passage = object(
        json!(["n", "passage_id", "text"]),
        json!({"n": {"type": "integer", "minimum": 1}, "passage_id": {"type": "string"},
            "collection": text_or_null, "title": text_or_null, "url": text_or_null,
            "text": {"type": "string"}, "score": number_or_null}),
    );
    let statements = |item: &Value| {
        object(
            json!(["statements"]),
            json!({"statements": {"type": "array", "items": item}}),
        )
    };
    json!({
        "search": object(json!(["collection", "retrieval", "results"]), json!({"collection": {"type": "string"},
            "retrieval": {"type": "string", "enum": ["bm25", "dense", "hybrid"]},
            "retrieval_fallback": {"type": "object", "required": ["requested", "reason"],
                "properties": {"requested": {"type": "string", "enum": ["dense", "hybrid"]},
                    "reason": {"type": "string", "enum": ["vectors_building", "vectors_missing"]}}},
            "results": {"type": "array", "items": search_result}})),
        "ask": object(json!(["conversation_id", "turn_id", "turn", "answer", "passages", "ptkb_used"]),
            json!({"conversation_id": {"type": "string"}, "turn_id": {"type": "string"},
                "turn": {"type": "integer", "minimum": 1}, "answer": {"type": "string"},
                "passages": {"type": "array", "items": cited_passage},
                "ptkb_used": {"type": "array", "items": {"type": "string"}}})),
        "list_ptkb": statements(&ptkb_statement),
        "add_ptkb": object(json!(["statement"]), json!({"statement": ptkb_statement})),
        "remove_ptkb": object(json!(["removed"]), json!({"removed": {"type": "string"}})),
        "list_profile": statements(&profile_statement),
        "add_profile": object(json!(["statement"]), json!({"statement": profile_statement})),
        "remove_profile": object(json!(["removed"]), json!({"removed": {"type": "integer"}})),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    collection: String,
    query: String,
    k: Option<usize>,
    retrieval: Option<Retrieval>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    question: String,
    collection: Option<String>,
    conversation_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConversationArgs {
    conversation_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddPtkbArgs {
    conversation_id: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemovePtkbArgs {
    conversation_id: String,
    statement_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddProfileArgs {
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveProfileArgs {
    id: i64,
}

fn args<T: DeserializeOwned>(arguments: &Value) -> Result<T, ApiError> {
    let arguments = if arguments.is_null() {
        json!({})
    } else {
        arguments.clone()
    };
    parse_json(&serde_json::to_vec(&arguments).unwrap_or_default())
}

/// Runs a tool (`tools/call`).
pub async fn call(
    state: &AppState,
    user: &User,
    name: &str,
    arguments: Value,
) -> Result<Value, RpcError> {
    let outcome: Outcome = match name {
        "search" => with_args(&arguments, |a| search(state, user, a)).await,
        "ask" => with_args(&arguments, |a| ask(state, user, a)).await,
        "list_ptkb" => with_args(&arguments, |a| list_ptkb(state, user, a)).await,
        "add_ptkb" => with_args(&arguments, |a| add_ptkb(state, user, a)).await,
        "remove_ptkb" => with_args(&arguments, |a| remove_ptkb(state, user, a)).await,
        "list_profile" => with_args(&arguments, |_: NoArgs| list_profile(state, user)).await,
        "add_profile" => with_args(&arguments, |a| add_profile(state, user, a)).await,
        "remove_profile" => with_args(&arguments, |a| remove_profile(state, user, a)).await,
        other => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("unknown tool {other:?}"),
            ))
        }
    };
    Ok(match outcome {
        Ok((text, structured)) => json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": false,
        }),
        Err(e) => json!({
            "content": [{"type": "text", "text": e.to_string()}],
            "isError": true,
        }),
    })
}

type Outcome = Result<(String, Value), ApiError>;

/// Parses the arguments, then runs the tool.
async fn with_args<T, F, Fut>(arguments: &Value, tool: F) -> Outcome
where
    T: DeserializeOwned,
    F: FnOnce(T) -> Fut,
    Fut: std::future::Future<Output = Outcome>,
{
    tool(args(arguments)?).await
}

/// Index errors of a tool's collection argument name it.
fn collection_error(e: crate::index::IndexError) -> ApiError {
    let mut e = ApiError::from(e);
    if e.code == ErrorCode::NotFound {
        e.field = Some("collection".to_string());
    }
    e
}

fn conversation_id(value: &str) -> Result<Uuid, ApiError> {
    parse_uuid("conversation_id", value)
}

/// Store errors about a conversation name the argument they come from.
fn not_found_as(field: &'static str) -> impl Fn(ConversationError) -> ApiError {
    move |e| match e {
        ConversationError::Store(StoreError::NotFound { entity }) => {
            ApiError::field(ErrorCode::NotFound, field, format!("{entity} not found"))
        }
        other => other.into(),
    }
}

/// BM25 candidates the model rescores for a search (the API's default depth).
const SEARCH_DEPTH: usize = 100;

async fn search(state: &AppState, user: &User, a: SearchArgs) -> Outcome {
    let k = a.k.unwrap_or(5);
    // The same retrieval, reranking (when a model is loaded) and fusion as a turn and as
    // `GET /v1/collections/{name}/search`.
    let request = SearchRequest {
        user_id: Some(user.id),
        collection: a.collection.clone(),
        query: a.query.clone(),
        k,
        depth: SEARCH_DEPTH.max(k),
        rerank: state.turns.reranker().is_some(),
        retrieval: a.retrieval.unwrap_or_default(),
    };
    request.check("query")?;
    let hits = state
        .turns
        .search_as(user.id, &request)
        .await
        .map_err(|e| {
            let mut e = ApiError::from(e);
            if e.code == ErrorCode::NotFound {
                e.field = Some("collection".to_string());
            }
            e
        })?;
    let (retrieval, fallback) = (hits.retrieval, hits.fallback);
    let hits = hits.passages;
    let mut text = String::new();
    if let Some(f) = &fallback {
        text.push_str(&format!(
            "(BM25: the collection's passage vectors are not ready for {} retrieval)\n\n",
            f.requested
        ));
    }
    let results: Vec<Value> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            text.push_str(&format!(
                "[{}] {} ({}) {}\n{}\n\n",
                i + 1,
                h.title,
                h.id,
                h.url,
                h.text
            ));
            json!({"rank": i + 1, "id": h.id, "score": h.score, "bm25_score": h.retrieval_score, "rerank_score": h.rerank_score, "title": h.title, "url": h.url, "text": h.text})
        })
        .collect();
    if results.is_empty() {
        text.push_str("no passage matches");
    }
    Ok((text.trim_end().to_string(), {
        let mut content =
            json!({"collection": a.collection, "retrieval": retrieval, "results": results});
        if let Some(f) = fallback {
            content["retrieval_fallback"] = json!(f);
        }
        content
    }))
}

/// An error naming `from` names `to` instead (the chat service's field as the tool calls it).
fn rename_field(mut e: ApiError, from: &str, to: &str) -> ApiError {
    if e.field.as_deref() == Some(from) {
        e.field = Some(to.to_string());
    }
    e
}

async fn ask(state: &AppState, user: &User, a: AskArgs) -> Outcome {
    let history = state.chat.read_history(&[IncomingMessage {
        role: "user".to_string(),
        text: a.question.clone(),
    }]);
    // The history's one message is the tool's `question`.
    let history = history.map_err(|e| rename_field(e.into(), "messages[0].content", "question"))?;
    let explicit = match &a.conversation_id {
        Some(id) => Some(conversation_id(id)?),
        None => None,
    };
    let collection = match (&a.collection, &state.default_collection) {
        (Some(collection), _) => collection.clone(),
        (None, Some(default)) => default.name().to_string(),
        (None, None) if explicit.is_some() => String::new(),
        (None, None) => {
            return Err(ApiError::invalid(
                "collection",
                "is required: this server has no default collection",
            ))
        }
    };
    if explicit.is_none() {
        state
            .turns
            .visible_retriever(Some(user.id), &collection)
            .await
            .map_err(|e| match e {
                crate::service::ServiceError::Index(e) => collection_error(e),
                other => other.into(),
            })?;
    }
    let request = ChatTurnRequest {
        history: &history,
        explicit,
        key: None,
        options: Default::default(),
        resends_history: false,
    };
    let admitted = state
        .chat
        .admit(user.id, &collection, request)
        .await
        .map_err(ApiError::from)
        .map_err(|e| rename_field(e, "messages", "question"))?;
    let turn = state.chat.answer(admitted, &mut |_| {}).await?;
    let answer = answer(&turn, None);
    let mut text = answer.content.clone();
    text.push_str(&answer.sources_text());
    text.push_str(&format!(
        "\n\nconversation_id: {} (turn {})",
        turn.conversation_id, turn.seq
    ));
    let ptkb_used: Vec<&str> = turn
        .ptkb_ranking
        .iter()
        .filter(|s| s.selected)
        .map(|s| s.text.as_str())
        .collect();
    Ok((
        text,
        json!({"conversation_id": turn.conversation_id, "turn_id": turn.id, "turn": turn.seq,
            "answer": answer.content, "passages": answer.passages, "ptkb_used": ptkb_used}),
    ))
}

fn statements_text(texts: impl Iterator<Item = (String, String)>) -> String {
    let lines: Vec<String> = texts.map(|(id, text)| format!("{id}: {text}")).collect();
    if lines.is_empty() {
        "no statements".to_string()
    } else {
        lines.join("\n")
    }
}

async fn list_ptkb(state: &AppState, user: &User, a: ConversationArgs) -> Outcome {
    let id = conversation_id(&a.conversation_id)?;
    let statements = state
        .conversations
        .ptkb(user.id, id, None)
        .await
        .map_err(not_found_as("conversation_id"))?;
    let text = statements_text(statements.iter().map(|s| (s.id.clone(), s.text.clone())));
    Ok((text, json!({ "statements": statements })))
}

async fn add_ptkb(state: &AppState, user: &User, a: AddPtkbArgs) -> Outcome {
    let id = conversation_id(&a.conversation_id)?;
    let statement = state
        .conversations
        .add_statement(
            user.id,
            id,
            NewStatement {
                id: None,
                text: a.text,
            },
        )
        .await
        .map_err(not_found_as("conversation_id"))?;
    Ok((
        format!("added statement {}: {}", statement.id, statement.text),
        json!({ "statement": statement }),
    ))
}

async fn remove_ptkb(state: &AppState, user: &User, a: RemovePtkbArgs) -> Outcome {
    let id = conversation_id(&a.conversation_id)?;
    state
        .conversations
        .remove_statement(user.id, id, &a.statement_id)
        .await
        .map_err(|e| match e {
            ConversationError::Store(StoreError::NotFound {
                entity: "conversation",
            }) => ApiError::field(
                ErrorCode::NotFound,
                "conversation_id",
                "conversation not found",
            ),
            ConversationError::Store(StoreError::NotFound { entity }) => ApiError::field(
                ErrorCode::NotFound,
                "statement_id",
                format!("{entity} not found"),
            ),
            other => other.into(),
        })?;
    Ok((
        format!("removed statement {}", a.statement_id),
        json!({ "removed": a.statement_id }),
    ))
}

async fn list_profile(state: &AppState, user: &User) -> Outcome {
    let statements = state.conversations.profile(user.id).await?;
    let text = statements_text(
        statements
            .iter()
            .map(|s| (s.id.to_string(), s.text.clone())),
    );
    Ok((text, json!({ "statements": statements })))
}

async fn add_profile(state: &AppState, user: &User, a: AddProfileArgs) -> Outcome {
    let statement = state
        .conversations
        .add_profile_statement(user.id, &a.text)
        .await?;
    Ok((
        format!(
            "added profile statement {}: {}",
            statement.id, statement.text
        ),
        json!({ "statement": statement }),
    ))
}

async fn remove_profile(state: &AppState, user: &User, a: RemoveProfileArgs) -> Outcome {
    state
        .conversations
        .remove_profile_statement(user.id, a.id)
        .await
        .map_err(not_found_as("id"))?;
    Ok((
        format!("removed profile statement {}", a.id),
        json!({ "removed": a.id }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_schema() {
        let tools = definitions();
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(t["inputSchema"]["type"], "object", "{t}");
                assert_eq!(t["outputSchema"]["type"], "object", "{t}");
                assert!(!t["outputSchema"]["required"].as_array().unwrap().is_empty());
                assert!(t["description"].as_str().unwrap().len() > 10);
                t["name"].as_str().unwrap()
            })
            .collect();
        assert_eq!(
            names,
            [
                "search",
                "ask",
                "list_ptkb",
                "add_ptkb",
                "remove_ptkb",
                "list_profile",
                "add_profile",
                "remove_profile"
            ]
        );
    }

    #[test]
    fn arguments_name_the_bad_field() {
        let e = args::<SearchArgs>(&json!({"collection": "c"})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("query"));
        let e = args::<SearchArgs>(&json!({"collection": "c", "query": "q", "x": 1})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("x"));
        assert!(args::<NoArgs>(&Value::Null).is_ok());
    }
}
