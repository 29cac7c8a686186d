//! Anthropic Messages and Message Batches against the sim.

use std::collections::BTreeSet;

use chrono::Duration;
use futures_util::StreamExt;
use memsift_llm::anthropic::{BatchResult, BatchResultLine, ProcessingStatus, StopReason};
use memsift_llm::{CreateOutcome, LlmError};
use memsift_sim::FaultConfig;

use crate::support::{harness, params_with, requests, system_prompt};

async fn collect(stream: memsift_llm::JsonLines<BatchResultLine>) -> Vec<BatchResultLine> {
    stream
        .map(|line| line.expect("every result line parses"))
        .collect()
        .await
}

#[tokio::test]
async fn a_message_reports_usage_and_the_second_call_reads_the_cache() {
    let h = harness(FaultConfig::default(), r#"[{"text":"Ana has a dog named Rex."}]"#).await;
    let client = h.anthropic();
    // Above Haiku 4.5's minimum cacheable prefix of 4,096 tokens.
    let body = || params_with("claude-haiku-4-5", system_prompt(4_400), 1024);
    let first = client.create_message(&body()).await.unwrap();
    assert!(first.id.starts_with("msg_"));
    assert_eq!(first.text(), r#"[{"text":"Ana has a dog named Rex."}]"#);
    assert_eq!(first.stop_reason, Some(StopReason::EndTurn));
    let usage = first.token_usage();
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
    assert!(usage.cache_creation_1h_tokens >= 4_096, "{usage:?}");
    assert_eq!(usage.cache_read_tokens, 0);

    let second = client.create_message(&body()).await.unwrap().token_usage();
    assert_eq!(second.cache_read_tokens, usage.cache_creation_1h_tokens);
    assert_eq!(second.cache_creation_1h_tokens, 0);
    assert_eq!(second.total_input_tokens(), usage.total_input_tokens());

    // Past the TTL the entry is gone and is written again.
    h.clock.advance(Duration::minutes(61));
    let third = client.create_message(&body()).await.unwrap().token_usage();
    assert_eq!(third.cache_read_tokens, 0);
    assert!(third.cache_creation_1h_tokens > 0);
}

#[tokio::test]
async fn a_marked_prefix_below_the_models_minimum_is_billed_in_full_with_both_counters_zero() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.anthropic();
    // About 2,000 tokens: over Sonnet 4.5's minimum of 1,024, under Haiku 4.5's 4,096.
    let system = system_prompt(2_000);
    for _ in 0..2 {
        let haiku = client
            .create_message(&params_with("claude-haiku-4-5", system.clone(), 256))
            .await
            .unwrap()
            .token_usage();
        assert_eq!(
            (
                haiku.cache_creation_5m_tokens,
                haiku.cache_creation_1h_tokens,
                haiku.cache_read_tokens
            ),
            (0, 0, 0),
            "{haiku:?}"
        );
        assert!(
            haiku.input_tokens >= 2_000,
            "the whole prompt is plain input: {haiku:?}"
        );
    }
    let sonnet = || params_with("claude-sonnet-4-5-20250929", system.clone(), 256);
    let first = client.create_message(&sonnet()).await.unwrap().token_usage();
    let second = client.create_message(&sonnet()).await.unwrap().token_usage();
    assert!(first.cache_creation_1h_tokens >= 2_000, "{first:?}");
    assert_eq!(second.cache_read_tokens, first.cache_creation_1h_tokens);
}

#[tokio::test]
async fn a_batch_runs_from_create_to_results_with_counts_frozen_until_it_ends() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.anthropic();
    let created = client.create_batch(&requests(3)).await.created().expect("created");
    assert!(created.id.starts_with("msgbatch_"));
    assert_eq!(created.processing_status, ProcessingStatus::InProgress);
    assert_eq!(created.request_counts.processing, 3);
    assert_eq!(created.results_url, None);
    assert_eq!(created.expires_at - created.created_at, Duration::hours(24));
    let early = client
        .batch_results(&created)
        .await
        .err()
        .expect("no results before the end");
    assert!(matches!(early, LlmError::Usage { .. }), "{early}");

    // Latency 0: the next retrieve ends it.
    let ended = client.retrieve_batch(&created.id).await.unwrap();
    assert_eq!(ended.processing_status, ProcessingStatus::Ended);
    assert_eq!(ended.request_counts.succeeded, 3);
    let url = ended.results_url.clone().expect("results_url once ended");
    assert!(url.starts_with(&h.sim.base_url), "absolute URL back at the sim: {url}");

    let lines = collect(client.batch_results(&ended).await.unwrap()).await;
    let ids: BTreeSet<String> = lines.iter().map(|line| line.custom_id.clone()).collect();
    assert_eq!(ids, ["req-0", "req-1", "req-2"].map(String::from).into());
    for line in &lines {
        let BatchResult::Succeeded { message } = &line.result else {
            panic!("{line:?}")
        };
        assert_eq!(message.usage.service_tier.as_deref(), Some("batch"));
    }
    let counters = h.sim.counters();
    assert_eq!((counters.creates, counters.polls, counters.result_downloads), (1, 1, 1));
}

#[tokio::test]
async fn processing_latency_follows_the_sim_clock() {
    let faults = FaultConfig {
        processing_latency_ms: 60_000,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    let batch = client.create_batch(&requests(1)).await.created().unwrap();
    let still = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!(still.processing_status, ProcessingStatus::InProgress);
    assert_eq!(still.request_counts.succeeded, 0);
    h.clock.advance(Duration::seconds(61));
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!(ended.processing_status, ProcessingStatus::Ended);
    assert!(ended.ended_at.is_some());
}

#[tokio::test]
async fn an_unfinished_batch_expires_after_24_hours() {
    let faults = FaultConfig {
        processing_latency_ms: 48 * 3_600_000,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    let batch = client.create_batch(&requests(2)).await.created().unwrap();
    h.clock.advance(Duration::hours(25));
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!(ended.request_counts.expired, 2);
    let lines = collect(client.batch_results(&ended).await.unwrap()).await;
    assert!(lines.iter().all(|line| line.result == BatchResult::Expired));
}

#[tokio::test]
async fn the_list_pages_newest_first_with_after_id() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.anthropic();
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(client.create_batch(&requests(1)).await.created().unwrap().id);
        h.clock.advance(Duration::seconds(10));
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = client.list_batches(after.as_deref(), 2).await.unwrap();
        assert!(page.data.len() <= 2);
        seen.extend(page.data.iter().map(|batch| batch.id.clone()));
        if !page.has_more {
            break;
        }
        after = page.last_id;
    }
    created.reverse();
    assert_eq!(seen, created, "newest first, every batch once");

    let since = crate::support::start_time() + Duration::seconds(25);
    let recent = client.list_batches_since(since).await.unwrap();
    assert_eq!(recent.len(), 2, "only the batches created at or after `since`");
}

#[tokio::test]
async fn cancel_goes_through_canceling_to_ended_with_canceled_results_and_then_delete() {
    let faults = FaultConfig {
        processing_latency_ms: 3_600_000,
        ..FaultConfig::default()
    };
    let h = harness(faults, "[]").await;
    let client = h.anthropic();
    let batch = client.create_batch(&requests(2)).await.created().unwrap();
    let refused = client.delete_batch(&batch.id).await.unwrap_err();
    assert!(
        matches!(refused, LlmError::InvalidRequest { status: 400, .. }),
        "{refused}"
    );

    let canceling = client.cancel_batch(&batch.id).await.unwrap();
    assert_eq!(canceling.processing_status, ProcessingStatus::Canceling);
    assert!(canceling.cancel_initiated_at.is_some());
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!(ended.processing_status, ProcessingStatus::Ended);
    assert_eq!(ended.request_counts.canceled, 2);
    let lines = collect(client.batch_results(&ended).await.unwrap()).await;
    assert!(lines.iter().all(|line| line.result == BatchResult::Canceled));

    client.delete_batch(&batch.id).await.unwrap();
    let gone = client.retrieve_batch(&batch.id).await.unwrap_err();
    assert!(matches!(gone, LlmError::NotFound { .. }), "{gone}");
}

#[tokio::test]
async fn bad_params_error_only_in_results_but_a_bad_custom_id_rejects_the_create() {
    let h = harness(FaultConfig::default(), "[]").await;
    let client = h.anthropic();
    let mut batch_requests = requests(2);
    batch_requests[1].params.max_tokens = 0;
    let batch = client
        .create_batch(&batch_requests)
        .await
        .created()
        .expect("params are checked later");
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    assert_eq!((ended.request_counts.succeeded, ended.request_counts.errored), (1, 1));
    let lines = collect(client.batch_results(&ended).await.unwrap()).await;
    let errored = lines.iter().find(|line| line.custom_id == "req-1").unwrap();
    let BatchResult::Errored { error } = &errored.result else {
        panic!("{errored:?}")
    };
    assert_eq!(error.error.kind.as_str(), "invalid_request_error");
    assert!(!error.error.retryable());

    let mut bad = requests(1);
    bad[0].custom_id = "x".repeat(65);
    match client.create_batch(&bad).await {
        CreateOutcome::Rejected(LlmError::InvalidRequest {
            status: 400, detail, ..
        }) => {
            assert!(detail.contains("at most 64 characters"), "{detail}")
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(h.sim.counters().creates, 1);
}

#[tokio::test]
async fn results_are_shuffled_and_read_across_crlf_and_tiny_chunks() {
    let faults = FaultConfig {
        seed: 3,
        results_crlf: true,
        results_chunk_bytes: Some(7),
        ..FaultConfig::default()
    };
    let h = harness(faults, r#"[{"text":"a long enough answer to span many chunks"}]"#).await;
    let client = h.anthropic();
    let batch = client.create_batch(&requests(20)).await.created().unwrap();
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    let lines = collect(client.batch_results(&ended).await.unwrap()).await;
    assert_eq!(lines.len(), 20);
    let order: Vec<String> = lines.iter().map(|line| line.custom_id.clone()).collect();
    let input: Vec<String> = (0..20).map(|n| format!("req-{n}")).collect();
    assert_ne!(order, input, "the sim shuffles results; join on custom_id");
    let mut sorted = order.clone();
    sorted.sort_by_key(|id| id[4..].parse::<u32>().unwrap());
    assert_eq!(sorted, input);
}

#[tokio::test]
async fn per_request_outcome_shares_are_seeded_and_counted() {
    let faults = FaultConfig {
        seed: 11,
        request_errored_share: 0.2,
        request_expired_share: 0.2,
        request_canceled_share: 0.2,
        ..FaultConfig::default()
    };
    let run = || async {
        let h = harness(faults.clone(), "[]").await;
        let client = h.anthropic();
        let batch = client.create_batch(&requests(40)).await.created().unwrap();
        let ended = client.retrieve_batch(&batch.id).await.unwrap();
        let mut lines = collect(client.batch_results(&ended).await.unwrap()).await;
        lines.sort_by(|a, b| a.custom_id.cmp(&b.custom_id));
        let kinds: Vec<&'static str> = lines
            .iter()
            .map(|line| match line.result {
                BatchResult::Succeeded { .. } => "succeeded",
                BatchResult::Errored { .. } => "errored",
                BatchResult::Canceled => "canceled",
                BatchResult::Expired => "expired",
            })
            .collect();
        let counts = ended.request_counts;
        assert_eq!(counts.total(), 40);
        assert_eq!(
            kinds.iter().filter(|kind| **kind == "errored").count() as u64,
            counts.errored
        );
        assert_eq!(
            kinds.iter().filter(|kind| **kind == "expired").count() as u64,
            counts.expired
        );
        assert!(counts.errored > 0 && counts.expired > 0 && counts.canceled > 0 && counts.succeeded > 0);
        kinds
    };
    assert_eq!(run().await, run().await, "the same seed gives the same outcomes");
}
