//! Strategies over real HTTP against an in-process memsift-sim, plus the offline lanes.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use memsift_core::config::{Config, LanePolicy, LlmConfig, ProviderKind};
use memsift_core::contract::Turn;
use memsift_core::status::{Lane, Purpose, Role};
use memsift_core::{ManualClock, RequestId};
use memsift_llm::{PriceTable, ResolvedLlm, RetryPolicy};
use memsift_routing::{
    BatchStrategy, BreakerPolicy, BreakerState, ColumnBilling, ExecutionOutcome, ExecutionRequest, ExecutionStrategy,
    FaultClass, HealthSignal, HeuristicStrategy, ImmediateStrategy, LaneKey, Router, TierAwareRequest,
    TierAwareStrategy,
};
use memsift_sim::{FaultConfig, HttpFault, ScriptedResponder, Sim, SimConfig, SimHandle};

const KEY: &str = "sk-test-routing";
const ANSWER: &str = r#"[{"text":"Ana has a dog named Rex."}]"#;

fn turns() -> Vec<Turn> {
    vec![
        Turn {
            label: "t1".into(),
            role: Role::User,
            speaker: None,
            content: "My name is Ana and I have a dog named Rex.".into(),
            at: Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 0).unwrap(),
        },
        Turn {
            label: "t2".into(),
            role: Role::Assistant,
            speaker: None,
            content: "Nice to meet you, Ana!".into(),
            at: Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 5).unwrap(),
        },
    ]
}

async fn sim(faults: FaultConfig) -> SimHandle {
    let responder = ScriptedResponder::from_fn(|_| memsift_sim::ResponderReply::Text(ANSWER.to_owned()));
    Sim::start(
        SimConfig::new(Arc::new(responder))
            .with_faults(faults)
            .with_api_key(KEY),
    )
    .await
    .unwrap()
}

fn llm_config(provider: ProviderKind, endpoint: String, model: &str) -> LlmConfig {
    LlmConfig {
        provider,
        endpoint: Some(endpoint),
        model: Some(model.to_owned()),
        api_key_env: None,
        api_key_file: None,
        lane: LanePolicy::Immediate,
        temperature: None,
        max_tokens: 1024,
        thinking_budget_tokens: None,
        cache_ttl: "1h".into(),
        fallback: Vec::new(),
    }
}

fn strategy(key: &str) -> ImmediateStrategy {
    let keys = BTreeMap::from([(key.to_owned(), KEY.to_owned().into())]);
    // No retries: a fault is seen as the caller would see an exhausted retry budget.
    ImmediateStrategy::new(keys, PriceTable::default()).with_retry_policy(RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    })
}

async fn run(strategy: &dyn ExecutionStrategy, llm: &ResolvedLlm) -> ExecutionOutcome {
    let turns = turns();
    let message = memsift_core::transcript::render_turns(&turns);
    strategy
        .execute(&ExecutionRequest {
            request_id: RequestId::new_v7(),
            purpose: Purpose::Extraction,
            system_prompt: "You extract memories.",
            user_message: &message,
            turns: &turns,
            llm,
        })
        .await
}

#[tokio::test]
async fn immediate_calls_anthropic_messages_and_prices_the_answer() {
    let sim = sim(FaultConfig::default()).await;
    let config = llm_config(ProviderKind::Anthropic, sim.base_url.clone(), "claude-haiku-4-5");
    let llm = ResolvedLlm::resolve("extraction_premium", &config).unwrap();
    let outcome = run(&strategy("extraction_premium"), &llm).await;
    let ExecutionOutcome::Completed {
        raw_output,
        stop_reason,
        usage,
        cost_usd,
        model,
    } = outcome
    else {
        panic!("expected an answer, got {outcome:?}");
    };
    assert_eq!(raw_output, ANSWER);
    assert_eq!(stop_reason.as_deref(), Some("end_turn"));
    assert!(model.starts_with("claude-haiku-4-5"), "{model}");
    assert!(usage.total_input_tokens() > 0 && usage.output_tokens > 0, "{usage:?}");
    assert!(cost_usd > 0.0);
    assert_eq!(sim.counters().per_endpoint["messages"], 1);
}

#[tokio::test]
async fn immediate_calls_openai_chat_for_openai_and_compatible_providers() {
    let sim = sim(FaultConfig::default()).await;
    for provider in [ProviderKind::Openai, ProviderKind::OpenaiCompatible] {
        let config = llm_config(provider, sim.openai_base_url(), "gpt-4o-mini");
        let llm = ResolvedLlm::resolve("extraction_standard", &config).unwrap();
        let outcome = run(&strategy("extraction_standard"), &llm).await;
        let ExecutionOutcome::Completed {
            raw_output,
            stop_reason,
            cost_usd,
            ..
        } = outcome
        else {
            panic!("expected an answer from {provider:?}, got {outcome:?}");
        };
        assert_eq!(raw_output, ANSWER);
        assert_eq!(stop_reason.as_deref(), Some("stop"));
        assert!(cost_usd > 0.0);
    }
    assert_eq!(sim.counters().per_endpoint["chat.completions"], 2);
}

#[tokio::test]
async fn a_server_error_is_an_outage_that_spends_the_attempt() {
    let faults = FaultConfig {
        server_error: Some(HttpFault::first(1, "messages")),
        ..FaultConfig::default()
    };
    let sim = sim(faults).await;
    let config = llm_config(ProviderKind::Anthropic, sim.base_url.clone(), "claude-haiku-4-5");
    let llm = ResolvedLlm::resolve("extraction_premium", &config).unwrap();
    let strategy = strategy("extraction_premium");
    let outcome = run(&strategy, &llm).await;
    let ExecutionOutcome::Failed { error, class, fix } = outcome.clone() else {
        panic!("expected a failure, got {outcome:?}");
    };
    assert_eq!(class, FaultClass::Outage);
    assert_eq!(fix, None);
    assert!(matches!(outcome.health_signal(), Some(HealthSignal::Outage(_))));
    assert!(!error.contains(KEY), "errors never carry the key");
    // The fault was the first call only: the next attempt succeeds on the same client.
    assert!(matches!(run(&strategy, &llm).await, ExecutionOutcome::Completed { .. }));
}

#[tokio::test]
async fn a_wrong_key_is_a_setting_fault_that_names_the_section_to_fix() {
    let sim = sim(FaultConfig::default()).await;
    let config = llm_config(ProviderKind::Openai, sim.openai_base_url(), "gpt-4o-mini");
    let llm = ResolvedLlm::resolve("extraction_standard", &config).unwrap();
    let keys = BTreeMap::from([("extraction_standard".to_owned(), "sk-wrong".to_owned().into())]);
    let strategy = ImmediateStrategy::new(keys, PriceTable::default());
    let outcome = run(&strategy, &llm).await;
    let ExecutionOutcome::Failed {
        class: FaultClass::Setting,
        fix: Some(fix),
        ..
    } = &outcome
    else {
        panic!("expected a setting fault, got {outcome:?}");
    };
    assert!(fix.contains("API key of llm.extraction_standard"), "{fix}");
    assert!(matches!(outcome.health_signal(), Some(HealthSignal::Setting { .. })));
}

#[tokio::test]
async fn the_offline_lanes_answer_without_a_provider() {
    let config = llm_config(ProviderKind::Anthropic, "http://127.0.0.1:9".into(), "claude-haiku-4-5");
    let llm = ResolvedLlm::resolve("extraction_standard", &config).unwrap();
    let outcome = run(&HeuristicStrategy, &llm).await;
    assert_eq!(
        outcome,
        ExecutionOutcome::Completed {
            raw_output: memsift_heuristic::extract_json(&turns()),
            stop_reason: None,
            usage: Default::default(),
            cost_usd: 0.0,
            model: memsift_heuristic::RULES_VERSION.to_owned(),
        }
    );
    assert_eq!(run(&BatchStrategy, &llm).await, ExecutionOutcome::Deferred);
}

#[tokio::test]
async fn tier_aware_routes_per_call_and_feeds_immediate_failures_to_the_breaker() {
    let faults = FaultConfig {
        server_error: Some(HttpFault::first(1, "messages")),
        ..FaultConfig::default()
    };
    let sim = sim(faults).await;
    let mut config = Config::defaults();
    config.billing.tiers = vec!["standard".into(), "premium".into()];
    // Only extraction is configured for premium; the stages' keys are not under test.
    config.postprocess.enabled = false;
    let mut premium = llm_config(ProviderKind::Anthropic, sim.base_url.clone(), "claude-haiku-4-5");
    premium.lane = LanePolicy::Auto;
    config.llm.insert("extraction_premium".into(), premium);
    let router = Arc::new(
        Router::new(
            &config,
            Arc::new(ColumnBilling {
                default_tier: "standard".into(),
            }),
        )
        .unwrap()
        .with_breaker_policy(BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        }),
    );
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 0).unwrap());
    let tier_aware = TierAwareStrategy::new(
        Arc::clone(&router),
        strategy("extraction_premium"),
        Arc::new(clock.clone()),
    );
    let turns = turns();
    let message = memsift_core::transcript::render_turns(&turns);
    let request = |tier: &'static str, urgent: bool| TierAwareRequest {
        request_id: RequestId::new_v7(),
        purpose: Purpose::Extraction,
        tier,
        urgent,
        system_prompt: "You extract memories.",
        user_message: &message,
        turns: &turns,
    };

    let standard = tier_aware.execute_routed(&request("standard", false)).await.unwrap();
    assert_eq!(standard.route.lane, Lane::Heuristic);
    assert!(matches!(
        standard.outcome,
        ExecutionOutcome::Completed { cost_usd: 0.0, .. }
    ));

    let deferred = tier_aware.execute_routed(&request("premium", false)).await.unwrap();
    assert_eq!(
        (deferred.route.lane, deferred.outcome),
        (Lane::Batch, ExecutionOutcome::Deferred)
    );

    // Urgent work goes immediate; its 500 opens the breaker (threshold 1) ...
    let urgent = tier_aware.execute_routed(&request("premium", true)).await.unwrap();
    assert_eq!(urgent.route.lane, Lane::Immediate);
    assert!(matches!(
        urgent.outcome,
        ExecutionOutcome::Failed {
            class: FaultClass::Outage,
            ..
        }
    ));
    let immediate = LaneKey::of(Lane::Immediate, &urgent.route.llm);
    assert!(matches!(
        router.breaker_state(&immediate, memsift_core::Clock::now(&clock)),
        BreakerState::Open { .. }
    ));
    // ... which is the immediate lane's alone: non-urgent work still goes to the batch lane, ...
    let batch = tier_aware.execute_routed(&request("premium", false)).await.unwrap();
    assert_eq!(batch.route.lane, Lane::Batch);
    // ... and urgent work, with nowhere else to go, still calls; its success closes the breaker.
    let retried = tier_aware.execute_routed(&request("premium", true)).await.unwrap();
    assert_eq!(retried.route.lane, Lane::Immediate);
    assert!(matches!(retried.outcome, ExecutionOutcome::Completed { .. }));
    assert_eq!(
        router.breaker_state(&immediate, memsift_core::Clock::now(&clock)),
        BreakerState::Closed {
            consecutive_failures: 0
        }
    );
}

#[test]
fn keys_are_read_at_start_up_and_a_missing_one_names_the_variable() {
    let mut config = Config::defaults();
    let mut premium = llm_config(ProviderKind::Anthropic, "http://127.0.0.1:9".into(), "claude-haiku-4-5");
    premium.api_key_env = Some("MEMSIFT_ROUTING_TEST_KEY_THAT_IS_NEVER_SET".into());
    config.llm.insert("extraction_premium".into(), premium);
    let error = ImmediateStrategy::from_config(&config, PriceTable::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "llm.extraction_premium: environment variable MEMSIFT_ROUTING_TEST_KEY_THAT_IS_NEVER_SET is unset or empty; export the API key in it or use api_key_file"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    std::fs::write(&path, format!("{KEY}\n")).unwrap();
    let premium = config.llm.get_mut("extraction_premium").unwrap();
    premium.api_key_env = None;
    premium.api_key_file = Some(path);
    assert!(ImmediateStrategy::from_config(&config, PriceTable::default()).is_ok());
}
