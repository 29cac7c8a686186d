//! OpenAI chat, embeddings, Files and Batches against the sim.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;
use futures_util::StreamExt;
use memsift_llm::openai::{
    BATCH_UUID_METADATA_KEY, Batch, BatchInputLine, BatchOutputLine, BatchStatus, ChatMessage, ChatRequest,
    EmbeddingsRequest, ResultFile,
};
use memsift_llm::{LlmError, OpenAiClient};
use memsift_sim::FaultConfig;

use crate::support::{harness, system_prompt, transcript};

fn chat_with(system: String, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: "gpt-4o-mini".into(),
        messages: vec![
            ChatMessage::new("system", system),
            ChatMessage::new("user", transcript()),
        ],
        max_completion_tokens: Some(max_tokens),
        temperature: Some(0.0),
        response_format: None,
    }
}

fn chat(max_tokens: u32) -> ChatRequest {
    chat_with(system_prompt(80), max_tokens)
}

fn lines(count: usize) -> Vec<BatchInputLine> {
    (0..count)
        .map(|n| BatchInputLine::chat(format!("req-{n}"), &chat(512)))
        .collect()
}

fn metadata(uuid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(BATCH_UUID_METADATA_KEY.to_owned(), uuid.to_owned())])
}

async fn read_file(client: &OpenAiClient, batch: &Batch, which: ResultFile) -> Option<Vec<BatchOutputLine>> {
    let stream = client.batch_result_lines(batch, which).await.unwrap()?;
    Some(stream.map(|line| line.expect("every line parses")).collect().await)
}

/// Polls until terminal, returning every status seen.
async fn poll(client: &OpenAiClient, id: &str) -> (Batch, Vec<BatchStatus>) {
    let mut walk = Vec::new();
    for _ in 0..10 {
        let batch = client.retrieve_batch(id).await.unwrap();
        if walk.last() != Some(&batch.status) {
            walk.push(batch.status);
        }
        if batch.status.is_terminal() {
            return (batch, walk);
        }
    }
    panic!("batch {id} did not finish: {walk:?}");
}

#[tokio::test]
async fn chat_completion_reports_usage_and_cached_prompt_tokens() {
    let h = harness(FaultConfig::default(), r#"[{"text":"Ana has a dog."}]"#).await;
    let client = h.openai();
    // Over OpenAI's automatic-caching minimum of 1,024 tokens, and not a whole number of steps.
    let long = || chat_with(system_prompt(1_300), 512);
    let first = client.chat_completion(&long()).await.unwrap();
    assert!(first.id.starts_with("chatcmpl-"));
    assert_eq!(first.text(), Some(r#"[{"text":"Ana has a dog."}]"#));
    assert!(!first.truncated());
    assert_eq!(
        first.token_usage().cache_read_tokens,
        0,
        "the first call writes, for free"
    );
    let second = client.chat_completion(&long()).await.unwrap().token_usage();
    assert!(second.cache_read_tokens >= 1_024, "{second:?}");
    assert_eq!(
        second.cache_read_tokens % 128,
        0,
        "hits count in steps of 128: {second:?}"
    );
    assert_eq!(second.total_input_tokens(), first.token_usage().total_input_tokens());

    // A short prompt is never cached.
    for _ in 0..2 {
        let short = client.chat_completion(&chat(512)).await.unwrap().token_usage();
        assert_eq!(short.cache_read_tokens, 0, "{short:?}");
    }
}

#[tokio::test]
async fn embeddings_are_deterministic_unit_vectors_of_the_requested_size() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.openai();
    let request = EmbeddingsRequest {
        model: "text-embedding-3-small".into(),
        input: vec!["I adopted a dog".into(), "my dog Rex".into()],
        dimensions: None,
    };
    let first = client.embeddings(&request).await.unwrap();
    assert_eq!(first.data.len(), 2);
    assert_eq!(first.data[0].embedding.len(), memsift_sim::DEFAULT_EMBEDDING_DIMENSIONS);
    let norm: f32 = first.data[0].embedding.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4);
    assert_eq!(client.embeddings(&request).await.unwrap(), first);
    let small = client
        .embeddings(&EmbeddingsRequest {
            dimensions: Some(64),
            ..request
        })
        .await
        .unwrap();
    assert_eq!(small.data[1].embedding.len(), 64);
}

#[tokio::test]
async fn a_batch_walks_validating_in_progress_finalizing_completed() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.openai();
    let file = client
        .upload_batch_file("memsift-uuid-1.jsonl", &lines(3))
        .await
        .created()
        .unwrap();
    assert!(file.id.starts_with("file-"));
    assert_eq!(file.purpose, "batch");
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &metadata("uuid-1"))
        .await
        .created()
        .unwrap();
    assert!(batch.id.starts_with("batch_"));
    assert_eq!(batch.status, BatchStatus::Validating);
    assert_eq!(batch.expires_at, Some(batch.created_at + 86_400));
    assert_eq!(batch.output_file_id, None);

    let (done, walk) = poll(&client, &batch.id).await;
    assert_eq!(
        walk,
        vec![BatchStatus::InProgress, BatchStatus::Finalizing, BatchStatus::Completed]
    );
    assert_eq!(done.request_counts.unwrap().completed, 3);
    assert_eq!(done.error_file_id, None);
    let output = read_file(&client, &done, ResultFile::Output).await.unwrap();
    let ids: BTreeSet<String> = output.iter().map(|line| line.custom_id.clone()).collect();
    assert_eq!(ids.len(), 3);
    for line in &output {
        let completion = line.chat_completion().unwrap().unwrap();
        assert_eq!(completion.text(), Some("[]"));
    }
    assert!(read_file(&client, &done, ResultFile::Error).await.is_none());

    let uploads = client.list_files(Some("batch"), None, 100).await.unwrap();
    assert!(
        uploads
            .data
            .iter()
            .any(|listed| listed.filename == "memsift-uuid-1.jsonl")
    );
    client.delete_file(&file.id).await.unwrap();
    assert!(matches!(
        client.retrieve_file(&file.id).await,
        Err(LlmError::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_batch_whose_every_line_failed_completes_with_no_output_file() {
    let faults = FaultConfig {
        request_errored_share: 1.0,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.openai();
    let file = client
        .upload_batch_file("all-fail.jsonl", &lines(2))
        .await
        .created()
        .unwrap();
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &metadata("u"))
        .await
        .created()
        .unwrap();
    let (done, _) = poll(&client, &batch.id).await;
    assert_eq!(done.status, BatchStatus::Completed);
    assert_eq!(done.output_file_id, None, "completed with no output file");
    assert!(read_file(&client, &done, ResultFile::Output).await.is_none());
    let errors = read_file(&client, &done, ResultFile::Error).await.unwrap();
    assert_eq!(errors.len(), 2);
    assert!(
        errors
            .iter()
            .all(|line| line.failure_code().as_deref() == Some("server_error"))
    );
}

#[tokio::test]
async fn an_expired_batch_keeps_partial_output_and_lists_the_rest_as_batch_expired() {
    let faults = FaultConfig {
        seed: 5,
        request_expired_share: 0.5,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.openai();
    let file = client
        .upload_batch_file("partial.jsonl", &lines(10))
        .await
        .created()
        .unwrap();
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &metadata("u"))
        .await
        .created()
        .unwrap();
    let (done, _) = poll(&client, &batch.id).await;
    assert_eq!(done.status, BatchStatus::Expired);
    let output = read_file(&client, &done, ResultFile::Output).await.unwrap();
    let errors = read_file(&client, &done, ResultFile::Error).await.unwrap();
    assert!(!output.is_empty() && !errors.is_empty());
    assert_eq!(output.len() + errors.len(), 10);
    assert!(
        errors
            .iter()
            .all(|line| line.failure_code().as_deref() == Some("batch_expired"))
    );
}

#[tokio::test]
async fn the_24_hour_window_expires_an_unfinished_batch() {
    let faults = FaultConfig {
        processing_latency_ms: 48 * 3_600_000,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.openai();
    let file = client
        .upload_batch_file("slow.jsonl", &lines(2))
        .await
        .created()
        .unwrap();
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &metadata("u"))
        .await
        .created()
        .unwrap();
    assert_eq!(
        client.retrieve_batch(&batch.id).await.unwrap().status,
        BatchStatus::InProgress
    );
    assert_eq!(
        client.retrieve_batch(&batch.id).await.unwrap().status,
        BatchStatus::InProgress
    );
    h.clock.advance(Duration::hours(25));
    let (done, _) = poll(&client, &batch.id).await;
    assert_eq!(done.status, BatchStatus::Expired);
    assert_eq!(done.output_file_id, None);
    let errors = read_file(&client, &done, ResultFile::Error).await.unwrap();
    assert!(
        errors
            .iter()
            .all(|line| line.failure_code().as_deref() == Some("batch_expired"))
    );
}

#[tokio::test]
async fn cancel_goes_through_cancelling_to_cancelled_with_batch_cancelled_lines() {
    let faults = FaultConfig {
        processing_latency_ms: 3_600_000,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.openai();
    let file = client
        .upload_batch_file("cancel.jsonl", &lines(2))
        .await
        .created()
        .unwrap();
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &metadata("u"))
        .await
        .created()
        .unwrap();
    let cancelling = client.cancel_batch(&batch.id).await.unwrap();
    assert_eq!(cancelling.status, BatchStatus::Cancelling);
    let (done, _) = poll(&client, &batch.id).await;
    assert_eq!(done.status, BatchStatus::Cancelled);
    let errors = read_file(&client, &done, ResultFile::Error).await.unwrap();
    assert_eq!(errors.len(), 2);
    assert!(
        errors
            .iter()
            .all(|line| line.failure_code().as_deref() == Some("batch_cancelled"))
    );
}

#[tokio::test]
async fn an_invalid_input_file_fails_validation_with_line_errors() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.openai();
    let line = serde_json::to_string(&BatchInputLine::chat("same", &chat(16))).unwrap();
    let content = format!("{line}\n{line}\nnot json\n").into_bytes();
    let file = client
        .upload_file("dup.jsonl", "batch", content)
        .await
        .created()
        .unwrap();
    let batch = client
        .create_batch(&file.id, "/v1/chat/completions", &metadata("u"))
        .await
        .created()
        .unwrap();
    let (done, walk) = poll(&client, &batch.id).await;
    assert_eq!(walk, vec![BatchStatus::Failed]);
    let codes: Vec<String> = done
        .errors
        .unwrap()
        .data
        .into_iter()
        .filter_map(|error| error.code.map(String::from))
        .collect();
    assert_eq!(codes, vec!["duplicate_custom_id", "invalid_json_line"]);
    assert_eq!(done.output_file_id, None);
}

#[tokio::test]
async fn the_batch_list_pages_with_after_and_finds_a_batch_by_its_metadata() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.openai();
    let file = client
        .upload_batch_file("list.jsonl", &lines(1))
        .await
        .created()
        .unwrap();
    let mut created = Vec::new();
    for n in 0..5 {
        let uuid = format!("uuid-{n}");
        created.push(
            client
                .create_batch(&file.id, "/v1/chat/completions", &metadata(&uuid))
                .await
                .created()
                .unwrap()
                .id,
        );
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = client.list_batches(after.as_deref(), 2).await.unwrap();
        seen.extend(page.data.iter().map(|batch| batch.id.clone()));
        if !page.has_more {
            break;
        }
        after = page.last_id;
    }
    created.reverse();
    assert_eq!(seen, created);
    let found = client.find_batch_by_uuid("uuid-1", 0).await.unwrap().unwrap();
    assert_eq!(found.id, created[3]);
    assert!(client.find_batch_by_uuid("uuid-missing", 0).await.unwrap().is_none());
}
