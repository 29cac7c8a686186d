//! The sim refuses what the provider refuses for a model's context window and output cap, in the
//! provider's words: a 400 on the immediate endpoints, an errored line inside a batch.

use futures_util::StreamExt;
use memsift_llm::LlmError;
use memsift_llm::anthropic::{BatchRequest, BatchResult, InputMessage};
use memsift_llm::openai::{BatchInputLine, BatchStatus, ChatMessage, ChatRequest, ResultFile};
use memsift_sim::FaultConfig;
use serde_json::{Value, json};

use crate::support::{KEY, harness, params_with};

/// About `tokens` o200k tokens of text ("word " is one).
fn text_of(tokens: usize) -> String {
    "word ".repeat(tokens)
}

/// A Haiku 4.5 body whose user message is about `tokens` tokens long.
fn long_params(tokens: usize, max_tokens: u32) -> memsift_llm::anthropic::MessageParams {
    let mut params = params_with(
        "claude-haiku-4-5-20251001",
        "You extract memories.".to_owned(),
        max_tokens,
    );
    params.messages = vec![InputMessage::user(text_of(tokens))];
    params
}

fn long_chat(tokens: usize, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: "gpt-4o-mini".into(),
        messages: vec![
            ChatMessage::new("system", "You extract memories."),
            ChatMessage::new("user", text_of(tokens)),
        ],
        max_completion_tokens: Some(max_tokens),
        temperature: None,
        response_format: None,
    }
}

/// The raw answer to a POST, status and JSON body, so the error's exact shape is checked.
async fn post(url: String, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    // reqwest comes without a crypto provider; the clients install ring, and so does this.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new().post(url).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn anthropic_refuses_a_prompt_over_the_window_and_an_output_over_the_cap_in_its_words() {
    let h = harness(FaultConfig::default(), "[]").await;
    let headers = [("x-api-key", KEY), ("anthropic-version", "2023-06-01")];
    let url = format!("{}/v1/messages", h.sim.base_url);
    let body = |tokens: usize, max_tokens: u32| serde_json::to_value(long_params(tokens, max_tokens)).unwrap();

    let (status, answer) = post(url.clone(), &headers, &body(210_000, 1024)).await;
    assert_eq!(status, 400);
    assert_eq!(answer["type"], "error");
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    let message = answer["error"]["message"].as_str().unwrap();
    let tokens: u64 = message
        .strip_prefix("prompt is too long: ")
        .and_then(|rest| rest.strip_suffix(" tokens > 200000 maximum"))
        .unwrap_or_else(|| panic!("{message}"))
        .parse()
        .unwrap();
    assert!((210_000..210_100).contains(&tokens), "{message}");
    assert!(answer["request_id"].as_str().unwrap().starts_with("req_"));

    // The input fits, but not with the room it asks for its output.
    let (status, answer) = post(url.clone(), &headers, &body(150_000, 60_000)).await;
    assert_eq!(status, 400);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("input length and `max_tokens` exceed context limit: 1500")
            && message.ends_with(" + 60000 > 200000, decrease input length or `max_tokens` and try again"),
        "{message}"
    );

    let (status, answer) = post(url.clone(), &headers, &body(10, 64_001)).await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["error"]["message"],
        "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for claude-haiku-4-5-20251001"
    );

    // Just inside both limits, the model answers; the client reads a refusal as a bad request.
    let client = h.anthropic();
    client.create_message(&long_params(150_000, 40_000)).await.unwrap();
    let refused = client.create_message(&long_params(210_000, 1024)).await.unwrap_err();
    assert!(
        matches!(&refused, LlmError::InvalidRequest { status: 400, detail, .. } if detail.as_str().contains("prompt is too long: 210")),
        "{refused}"
    );
    let counters = h.sim.counters();
    assert_eq!(counters.refused.get("context_window"), Some(&3));
    assert_eq!(counters.refused.get("max_tokens"), Some(&1));
}

#[tokio::test]
async fn an_anthropic_batch_answers_an_oversized_request_with_an_errored_result() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.anthropic();
    let requests = vec![
        BatchRequest {
            custom_id: "fits".into(),
            params: long_params(1_000, 1024),
        },
        BatchRequest {
            custom_id: "too-long".into(),
            params: long_params(210_000, 1024),
        },
    ];
    let batch = client
        .create_batch(&requests)
        .await
        .created()
        .expect("a batch takes it: params are checked when it runs");
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!((ended.request_counts.succeeded, ended.request_counts.errored), (1, 1));
    let lines: Vec<_> = client
        .batch_results(&ended)
        .await
        .unwrap()
        .map(|line| line.unwrap())
        .collect()
        .await;
    let refused = lines.iter().find(|line| line.custom_id == "too-long").unwrap();
    let BatchResult::Errored { error } = &refused.result else {
        panic!("{refused:?}")
    };
    assert_eq!(error.error.kind.as_str(), "invalid_request_error");
    assert!(
        error.error.message.as_str().starts_with("prompt is too long: 2100"),
        "{error:?}"
    );
    assert!(
        error.error.message.as_str().ends_with(" tokens > 200000 maximum"),
        "{error:?}"
    );
    assert!(!error.error.retryable(), "resending it as it is cannot succeed");
}

#[tokio::test]
async fn openai_refuses_context_length_exceeded_in_its_error_object() {
    let h = harness(FaultConfig::default(), "[]").await;
    let bearer = format!("Bearer {KEY}");
    let headers = [("authorization", bearer.as_str())];
    let url = format!("{}/chat/completions", h.sim.openai_base_url());

    let (status, answer) = post(
        url.clone(),
        &headers,
        &serde_json::to_value(long_chat(130_000, 1000)).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130"
        ) && message.ends_with(" tokens. Please reduce the length of the messages."),
        "{message}"
    );
    assert_eq!(answer["error"]["code"], "context_length_exceeded");

    // The input fits, but not with the completion it asks room for.
    let (status, answer) = post(
        url.clone(),
        &headers,
        &serde_json::to_value(long_chat(127_500, 1000)).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    let error = &answer["error"];
    assert_eq!(
        (&error["type"], &error["param"], &error["code"]),
        (
            &json!("invalid_request_error"),
            &json!("messages"),
            &json!("context_length_exceeded")
        )
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("This model's maximum context length is 128000 tokens. However, you requested 128")
            && message.ends_with(
                " in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
            ),
        "{message}"
    );

    // Without a cap only the input is held to the window.
    let mut uncapped = serde_json::to_value(long_chat(120_000, 1)).unwrap();
    uncapped.as_object_mut().unwrap().remove("max_completion_tokens");
    let (status, _) = post(url.clone(), &headers, &uncapped).await;
    assert_eq!(status, 200);

    let (status, answer) = post(
        url.clone(),
        &headers,
        &serde_json::to_value(long_chat(10, 16_385)).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["error"],
        json!({"message": "max_completion_tokens is too large: 16385. This model supports at most 16384 completion tokens, whereas you provided 16385.",
               "type": "invalid_request_error", "param": "max_completion_tokens", "code": null})
    );

    let client = h.openai();
    let refused = client.chat_completion(&long_chat(130_000, 1000)).await.unwrap_err();
    assert!(
        matches!(refused, LlmError::InvalidRequest { status: 400, .. }),
        "{refused}"
    );
}

#[tokio::test]
async fn an_openai_batch_puts_an_oversized_request_in_the_error_file() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.openai();
    let lines = vec![
        BatchInputLine::chat("fits", &long_chat(1_000, 1000)),
        BatchInputLine::chat("too-long", &long_chat(130_000, 1000)),
    ];
    let file = client
        .upload_batch_file("windows.jsonl", &lines)
        .await
        .created()
        .unwrap();
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &Default::default())
        .await
        .created()
        .unwrap();
    let mut done = client.retrieve_batch(&batch.id).await.unwrap();
    for _ in 0..10 {
        if done.status.is_terminal() {
            break;
        }
        done = client.retrieve_batch(&batch.id).await.unwrap();
    }
    assert_eq!(done.status, BatchStatus::Completed);
    let read = |which| {
        let client = &client;
        let done = &done;
        async move {
            let stream = client.batch_result_lines(done, which).await.unwrap().unwrap();
            stream.map(|line| line.unwrap()).collect::<Vec<_>>().await
        }
    };
    let output = read(ResultFile::Output).await;
    assert_eq!(
        output.iter().map(|line| line.custom_id.as_str()).collect::<Vec<_>>(),
        ["fits"]
    );
    let errors = read(ResultFile::Error).await;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].custom_id, "too-long");
    assert_eq!(errors[0].failure_code().as_deref(), Some("context_length_exceeded"));
    let response = errors[0].response.as_ref().unwrap();
    assert_eq!(response.status_code, 400);
    assert_eq!(response.body["error"]["param"], "messages");
}
