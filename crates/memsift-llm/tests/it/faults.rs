//! Every injected fault, and what the client does about it.

use std::sync::Arc;
use std::time::Duration;

use memsift_llm::anthropic::{AnthropicClient, BatchResult, StopReason};
use memsift_llm::openai::BATCH_UUID_METADATA_KEY;
use memsift_llm::{CreateOutcome, LlmError};
use memsift_sim::{
    FaultConfig, HttpFault, LostCreateFault, LostCreateMode, MalformedKind, ScriptedResponder, Sim, SimConfig,
};

use crate::support::{KEY, harness, harness_with, params, requests};

fn ms(values: &[u64]) -> Vec<Duration> {
    values.iter().map(|value| Duration::from_millis(*value)).collect()
}

#[tokio::test]
async fn a_429_is_retried_after_exactly_the_delay_the_provider_asked_for() {
    let faults = FaultConfig {
        rate_limit: Some(HttpFault::first(2, "anthropic.batches.retrieve").retry_after_ms(1500)),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    let batch = client.create_batch(&requests(1)).await.created().unwrap();
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert!(ended.results_url.is_some());
    assert_eq!(h.time.sleeps(), ms(&[1500, 1500]));
    assert_eq!(h.sim.counters().polls, 3);
    assert_eq!(h.sim.counters().faults["rate_limit"], 2);
}

#[tokio::test]
async fn overload_is_retried_with_exponential_backoff_then_given_up_as_overloaded() {
    let faults = FaultConfig {
        overloaded: Some(HttpFault::first(100, "messages")),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let error = h.anthropic().create_message(&params(64)).await.unwrap_err();
    assert!(matches!(error, LlmError::Overloaded { .. }), "{error}");
    assert_eq!(h.time.sleeps(), ms(&[500, 1000, 2000]));
    assert_eq!(
        h.sim.counters().per_endpoint["messages"],
        4,
        "one try and three retries"
    );
}

#[tokio::test]
async fn server_errors_are_retried_and_a_persistent_one_ends_as_transient() {
    let faults = FaultConfig {
        server_error: Some(HttpFault::first(2, "chat.completions")),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.openai();
    let request = memsift_llm::openai::ChatRequest {
        model: "gpt-4o-mini".into(),
        messages: vec![memsift_llm::openai::ChatMessage::new("user", "hi")],
        max_completion_tokens: None,
        temperature: None,
        response_format: None,
    };
    client.chat_completion(&request).await.unwrap();
    assert_eq!(h.time.sleeps(), ms(&[500, 1000]));

    let always = FaultConfig {
        server_error: Some(HttpFault {
            first: 100,
            ..HttpFault::default()
        }),
        ..FaultConfig::default()
    };
    let h = harness(always, "[]").await;
    let error = h.openai().chat_completion(&request).await.unwrap_err();
    assert!(
        matches!(error, LlmError::Transient { status: Some(500), .. }),
        "{error}"
    );
    assert!(error.to_string().contains("retry later with backoff"), "{error}");
}

#[tokio::test]
async fn a_transient_404_right_after_create_is_retried_on_retrieve_and_results() {
    let faults = FaultConfig {
        not_found_after_create: 2,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    let batch = client.create_batch(&requests(1)).await.created().unwrap();
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!(h.time.sleeps().len(), 2);
    assert_eq!(h.sim.counters().faults["not_found_after_create"], 2);
    assert!(client.batch_results(&ended).await.is_ok());

    // An id that never existed still ends as NotFound once the retries run out.
    let missing = client.retrieve_batch("msgbatch_missing").await.unwrap_err();
    assert!(matches!(missing, LlmError::NotFound { .. }), "{missing}");
}

#[tokio::test]
async fn a_lost_create_answer_is_unknown_and_exactly_one_batch_exists_to_reconcile() {
    for mode in [LostCreateMode::DropConnection, LostCreateMode::ServerError] {
        let faults = FaultConfig {
            lost_create: Some(LostCreateFault {
                first: 1,
                share: 0.0,
                mode,
            }),
            ..FaultConfig::default()
        };
        let h = harness(faults, "[]").await;
        let client = h.anthropic();
        let before = crate::support::start_time();
        match client.create_batch(&requests(3)).await {
            CreateOutcome::Unknown(LlmError::Ambiguous { detail, .. }) => assert!(!detail.is_empty()),
            other => panic!("{mode:?}: expected Unknown, got {other:?}"),
        }
        let counters = h.sim.counters();
        assert_eq!(counters.creates, 1, "{mode:?}: the create was never retried");
        assert_eq!(counters.per_endpoint["anthropic.batches.create"], 1);
        assert!(h.time.sleeps().is_empty());

        // Reconcile through the list: one batch in the window, with our request count.
        let found = client.list_batches_since(before).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].request_counts.total(), 3);
    }
}

#[tokio::test]
async fn a_lost_openai_create_is_found_again_by_its_metadata() {
    let faults = FaultConfig {
        lost_create: Some(LostCreateFault {
            first: 1,
            ..LostCreateFault::default()
        }),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.openai();
    let line = memsift_llm::openai::BatchInputLine::chat(
        "one",
        &memsift_llm::openai::ChatRequest {
            model: "gpt-4o-mini".into(),
            messages: vec![memsift_llm::openai::ChatMessage::new("user", "hi")],
            max_completion_tokens: Some(16),
            temperature: None,
            response_format: None,
        },
    );
    let file = client.upload_batch_file("lost.jsonl", &[line]).await.created().unwrap();
    let metadata = [(BATCH_UUID_METADATA_KEY.to_owned(), "uuid-lost".to_owned())].into();
    let outcome = client.create_batch(&file.id, "/v1/chat/completions", &metadata).await;
    assert!(matches!(outcome, CreateOutcome::Unknown(_)), "{outcome:?}");
    assert_eq!(h.sim.counters().creates, 1);
    let found = client
        .find_batch_by_uuid("uuid-lost", 0)
        .await
        .unwrap()
        .expect("adopted by metadata");
    assert_eq!(found.input_file_id, file.id);
}

#[tokio::test]
async fn a_rate_limited_create_is_rejected_not_retried_and_pauses_the_shared_limiter() {
    let faults = FaultConfig {
        rate_limit: Some(HttpFault::first(1, "anthropic.batches.create").retry_after_ms(4000)),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    match client.create_batch(&requests(1)).await {
        CreateOutcome::Rejected(LlmError::RateLimited { retry_after, .. }) => {
            assert_eq!(retry_after, Some(Duration::from_millis(4000)))
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(h.sim.counters().creates, 0);
    assert_eq!(h.sim.counters().per_endpoint["anthropic.batches.create"], 1);

    // A second client on the same limiter waits out the pause before its own call.
    let other = h.anthropic();
    other.create_batch(&requests(1)).await.created().unwrap();
    assert_eq!(h.time.sleeps(), ms(&[4000]));
}

#[tokio::test]
async fn truncated_output_surfaces_max_tokens_and_length() {
    let faults = FaultConfig {
        truncated_share: 1.0,
        ..FaultConfig::default()
    };
    let h = harness(faults, r#"[{"text":"Ana adopted a dog named Rex in March."}]"#).await;
    let message = h.anthropic().create_message(&params(64)).await.unwrap();
    assert_eq!(message.stop_reason, Some(StopReason::MaxTokens));
    assert!(message.truncated());
    assert_eq!(message.usage.output_tokens, 64);
    assert!(serde_json::from_str::<serde_json::Value>(&message.text()).is_err());

    let client = h.anthropic();
    let batch = client.create_batch(&requests(1)).await.created().unwrap();
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    let mut stream = client.batch_results(&ended).await.unwrap();
    let line = futures_util::StreamExt::next(&mut stream).await.unwrap().unwrap();
    let BatchResult::Succeeded { message } = line.result else {
        panic!("succeeded")
    };
    assert!(message.truncated());

    let completion = h
        .openai()
        .chat_completion(&memsift_llm::openai::ChatRequest {
            model: "gpt-4o-mini".into(),
            messages: vec![memsift_llm::openai::ChatMessage::new("user", "hi")],
            max_completion_tokens: Some(32),
            temperature: None,
            response_format: None,
        })
        .await
        .unwrap();
    assert!(completion.truncated());
}

#[tokio::test]
async fn malformed_and_duplicated_output_reaches_the_caller_as_text() {
    let answer = r#"[{"text":"a"},{"text":"b"}]"#;
    for kind in MalformedKind::ALL {
        let faults = FaultConfig {
            malformed_share: 1.0,
            malformed_kinds: vec![kind],
            ..FaultConfig::default()
        };
        let h = harness(faults, answer).await;
        let text = h.anthropic().create_message(&params(1024)).await.unwrap().text();
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_err(),
            "{kind:?}: {text}"
        );
    }
    let faults = FaultConfig {
        duplicate_items_share: 1.0,
        ..FaultConfig::default()
    };
    let h = harness(faults, answer).await;
    let text = h.anthropic().create_message(&params(1024)).await.unwrap().text();
    let items: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0], items[1]);
}

#[tokio::test]
async fn a_response_slower_than_the_timeout_is_a_transient_timeout() {
    let faults = FaultConfig {
        slow: Some(HttpFault {
            delay_ms: 2_000,
            ..HttpFault::first(1, "messages")
        }),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let mut options = h.options(h.sim.base_url.clone(), "claude-haiku-4-5");
    options.request_timeout = Duration::from_millis(100);
    options.retry.max_retries = 0;
    let error = AnthropicClient::new(options)
        .unwrap()
        .create_message(&params(64))
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Transient { status: None, .. }), "{error}");
    assert!(error.to_string().contains("timed out"), "{error}");
}

#[tokio::test]
async fn a_wrong_key_is_an_auth_error_that_never_shows_the_key() {
    let config = SimConfig::new(Arc::new(ScriptedResponder::new())).with_api_key("the-right-key");
    let sim = Sim::start(config).await.unwrap();
    let h = harness(FaultConfig::default(), "[]").await;
    let options = h.options(sim.base_url.clone(), "claude-haiku-4-5");
    let client = AnthropicClient::new(options).unwrap();
    let error = client.create_message(&params(16)).await.unwrap_err();
    assert!(matches!(error, LlmError::Auth { status: 401, .. }), "{error}");
    assert!(!error.to_string().contains(KEY));
    assert!(!format!("{error:?}").contains(KEY));
    assert!(!format!("{client:?}").contains(KEY), "client Debug redacts the key");
    assert!(h.time.sleeps().is_empty(), "auth errors are not retried");
}

#[tokio::test]
async fn an_oversized_body_is_too_large() {
    let faults = FaultConfig {
        max_request_bytes: Some(256),
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    let error = client.create_message(&params(16)).await.unwrap_err();
    assert!(matches!(error, LlmError::TooLarge { .. }), "{error}");
    assert!(matches!(
        client.create_batch(&requests(2)).await,
        CreateOutcome::Rejected(LlmError::TooLarge { .. })
    ));
}

#[tokio::test]
async fn a_scripted_error_reply_is_classified_like_the_providers() {
    let script = ScriptedResponder::new();
    script.push(memsift_sim::ResponderReply::Error {
        status: 400,
        kind: "invalid_request_error".into(),
        message: "prompt is too long".into(),
    });
    let h = harness_with(FaultConfig::default(), script).await;
    let error = h.anthropic().create_message(&params(16)).await.unwrap_err();
    assert!(
        matches!(error, LlmError::InvalidRequest { status: 400, ref detail, .. } if detail.contains("prompt is too long")),
        "{error}"
    );
}
