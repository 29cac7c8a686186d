//! Lane choice: the routing table, the circuit breaker with injected time, and start-up checks.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use memsift_core::config::{Config, LanePolicy, LlmConfig, ProviderKind};
use memsift_core::status::{Lane, Purpose};
use memsift_routing::{
    BreakerPolicy, BreakerState, ColumnBilling, HealthSignal, LaneKey, Permit, Router, RoutingError,
};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 0).unwrap()
}

fn llm(provider: ProviderKind, lane: LanePolicy) -> LlmConfig {
    LlmConfig {
        provider,
        endpoint: None,
        model: (provider != ProviderKind::Heuristic).then(|| "claude-haiku-4-5".to_owned()),
        api_key_env: None,
        api_key_file: None,
        lane,
        temperature: None,
        max_tokens: 1024,
        thinking_budget_tokens: None,
        cache_ttl: "1h".to_owned(),
        fallback: Vec::new(),
    }
}

/// A config whose tiers are the given names, each answered by its own extraction config.
fn config(tiers: &[(&str, LlmConfig)]) -> Config {
    let mut config = Config::defaults();
    config.billing.tiers = tiers.iter().map(|(tier, _)| (*tier).to_owned()).collect();
    config.billing.default_tier = tiers[0].0.to_owned();
    config.llm.clear();
    // Only extraction is configured here; the stages' keys are not under test.
    config.postprocess.enabled = false;
    for (tier, llm) in tiers {
        config.llm.insert(format!("extraction_{tier}"), llm.clone());
    }
    config
}

fn router(config: &Config) -> Router {
    Router::new(
        config,
        Arc::new(ColumnBilling {
            default_tier: config.billing.default_tier.clone(),
        }),
    )
    .unwrap()
}

fn lane(router: &Router, tier: &str, urgent: bool, now: DateTime<Utc>) -> Lane {
    router.route(Purpose::Extraction, tier, urgent, now).unwrap().lane
}

#[test]
fn the_routing_table() {
    use LanePolicy::{Auto, Batch, Immediate};
    use ProviderKind::{Anthropic, Heuristic, Openai, OpenaiCompatible};
    // (provider, policy, urgent, expected lane)
    let cases = [
        (Heuristic, Auto, false, Lane::Heuristic),
        (Heuristic, Batch, false, Lane::Heuristic),
        (Heuristic, Immediate, true, Lane::Heuristic),
        (Anthropic, Auto, false, Lane::Batch),
        (Anthropic, Auto, true, Lane::Immediate),
        (Anthropic, Batch, false, Lane::Batch),
        (Anthropic, Batch, true, Lane::Batch),
        (Anthropic, Immediate, false, Lane::Immediate),
        (Openai, Auto, false, Lane::Batch),
        (Openai, Auto, true, Lane::Immediate),
        (Openai, Batch, false, Lane::Batch),
        (Openai, Immediate, false, Lane::Immediate),
        (OpenaiCompatible, Auto, false, Lane::Immediate),
        (OpenaiCompatible, Auto, true, Lane::Immediate),
        (OpenaiCompatible, Immediate, false, Lane::Immediate),
    ];
    for (provider, policy, urgent, expected) in cases {
        let config = config(&[("t", llm(provider, policy))]);
        let route = router(&config).route(Purpose::Extraction, "t", urgent, t0()).unwrap();
        assert_eq!(
            route.lane, expected,
            "{provider:?} with lane {policy:?}, urgent {urgent}"
        );
        assert_eq!(route.config_key, "extraction_t");
        assert_eq!(route.llm.provider, provider);
    }
}

fn batch_lane(router: &Router, key: &str) -> LaneKey {
    LaneKey::of(Lane::Batch, router.resolved(key).unwrap())
}

fn outage() -> HealthSignal {
    HealthSignal::Outage("anthropic: transient failure (HTTP 500)".to_owned())
}

#[test]
fn an_open_breaker_sends_auto_work_to_immediate_until_its_probe_succeeds() {
    let mut other = llm(ProviderKind::Openai, LanePolicy::Auto);
    other.model = Some("gpt-4o-mini".to_owned());
    let config = config(&[
        ("auto", llm(ProviderKind::Anthropic, LanePolicy::Auto)),
        ("forced", llm(ProviderKind::Anthropic, LanePolicy::Batch)),
        ("other", other),
    ]);
    let router = router(&config);
    let health = router.health();
    let lane_key = batch_lane(&router, "extraction_auto");
    assert_eq!(lane_key, batch_lane(&router, "extraction_forced"), "one provider lane");
    let now = t0();
    for _ in 0..4 {
        router.record_outcome(&lane_key, &outage(), now);
    }
    // 429s and bad requests say nothing about health and neither count nor reset.
    router.record_outcome(&lane_key, &HealthSignal::Neutral, now);
    assert_eq!(
        lane(&router, "auto", false, now),
        Lane::Batch,
        "four failures leave it closed"
    );
    router.record_outcome(&lane_key, &outage(), now);
    assert!(matches!(
        router.breaker_state(&lane_key, now),
        BreakerState::Open { until, cause } if until == now + Duration::seconds(60) && !cause.setting_fault
    ));
    assert_eq!(
        lane(&router, "auto", false, now),
        Lane::Immediate,
        "open: auto goes immediate"
    );
    assert_eq!(
        lane(&router, "forced", false, now),
        Lane::Batch,
        "an explicit batch policy with nowhere else to go is obeyed"
    );
    assert_eq!(
        lane(&router, "other", false, now),
        Lane::Batch,
        "breakers are per provider lane"
    );
    let later = now + Duration::seconds(59);
    assert_eq!(
        lane(&router, "auto", false, later),
        Lane::Immediate,
        "still cooling down"
    );

    // Half-open: routing spends no probe, so work is planned on the batch lane again ...
    let half_open = now + Duration::seconds(60);
    assert_eq!(lane(&router, "auto", false, half_open), Lane::Batch);
    assert_eq!(lane(&router, "auto", false, half_open), Lane::Batch);
    // ... until the first call there takes the probe; then it waits for the probe's answer.
    assert_eq!(health.acquire(&lane_key, half_open), Permit::Probe);
    assert_eq!(
        lane(&router, "auto", false, half_open),
        Lane::Immediate,
        "only one probe"
    );
    router.record_outcome(&lane_key, &HealthSignal::Success, half_open);
    assert_eq!(
        router.breaker_state(&lane_key, half_open),
        BreakerState::Closed {
            consecutive_failures: 0
        }
    );
    assert_eq!(lane(&router, "auto", false, half_open), Lane::Batch);
}

#[test]
fn a_failed_probe_reopens_for_twice_as_long_and_a_lost_probe_is_replaced_after_a_cool_down() {
    let config = config(&[("auto", llm(ProviderKind::Openai, LanePolicy::Auto))]);
    let router = router(&config).with_breaker_policy(BreakerPolicy {
        failure_threshold: 2,
        cool_down: Duration::seconds(30),
        max_cool_down: Duration::seconds(300),
    });
    let health = router.health();
    let lane_key = batch_lane(&router, "extraction_auto");
    let now = t0();
    router.record_outcome(&lane_key, &outage(), now);
    router.record_outcome(&lane_key, &outage(), now);
    assert_eq!(lane(&router, "auto", false, now), Lane::Immediate);

    let probe = now + Duration::seconds(30);
    assert_eq!(health.acquire(&lane_key, probe), Permit::Probe);
    router.record_outcome(&lane_key, &outage(), probe);
    assert!(matches!(
        router.breaker_state(&lane_key, probe),
        BreakerState::Open { until, .. } if until == probe + Duration::seconds(60)
    ));
    assert_eq!(
        lane(&router, "auto", false, probe + Duration::seconds(59)),
        Lane::Immediate
    );

    let second_probe = probe + Duration::seconds(60);
    assert_eq!(health.acquire(&lane_key, second_probe), Permit::Probe);
    // Its outcome never comes back (the batch was lost): after a cool-down another probe may go.
    assert_eq!(
        lane(&router, "auto", false, second_probe + Duration::seconds(59)),
        Lane::Immediate
    );
    assert_eq!(
        lane(&router, "auto", false, second_probe + Duration::seconds(60)),
        Lane::Batch
    );
}

#[test]
fn a_route_fails_over_in_order_and_back_when_the_first_provider_recovers() {
    let mut primary = llm(ProviderKind::Anthropic, LanePolicy::Batch);
    primary.fallback = vec!["second".to_owned(), "offline".to_owned()];
    let mut second = llm(ProviderKind::OpenaiCompatible, LanePolicy::Immediate);
    second.endpoint = Some("http://127.0.0.1:11434/v1".to_owned());
    second.model = Some("llama3.1".to_owned());
    let mut config = config(&[("standard", primary)]);
    config.llm.insert("second".to_owned(), second);
    config
        .llm
        .insert("offline".to_owned(), llm(ProviderKind::Heuristic, LanePolicy::Auto));
    config.validate().unwrap();
    let router = router(&config);
    let first = batch_lane(&router, "extraction_standard");
    let second = LaneKey::of(Lane::Immediate, router.resolved("second").unwrap());
    let route = |now| router.route(Purpose::Extraction, "standard", false, now).unwrap();
    let now = t0();
    assert_eq!(
        (route(now).lane, route(now).config_key),
        (Lane::Batch, "extraction_standard".to_owned())
    );

    router.record_outcome(
        &first,
        &HealthSignal::Setting {
            reason: "anthropic: not authorised (HTTP 401)".to_owned(),
            fix: None,
        },
        now,
    );
    let failed_over = route(now);
    assert_eq!(
        (failed_over.lane, failed_over.config_key.as_str()),
        (Lane::Immediate, "second")
    );
    assert_eq!(failed_over.llm, *router.resolved("second").unwrap());

    for _ in 0..5 {
        router.record_outcome(&second, &outage(), now);
    }
    assert_eq!(
        (route(now).lane, route(now).config_key),
        (Lane::Heuristic, "offline".to_owned())
    );

    // The first provider's cool-down ends first: new work goes back to it, in order.
    let recovered = now + Duration::seconds(60);
    assert_eq!(route(recovered).config_key, "extraction_standard");
    router.record_outcome(&first, &HealthSignal::Success, recovered);
    assert_eq!(
        route(recovered + Duration::seconds(1)).config_key,
        "extraction_standard"
    );
}

#[test]
fn a_fallback_must_name_an_existing_section_without_a_chain_of_its_own() {
    let mut primary = llm(ProviderKind::Anthropic, LanePolicy::Auto);
    primary.fallback = vec!["missing".to_owned()];
    let mut config = config(&[("standard", primary)]);
    assert_eq!(
        config.validate().unwrap_err().to_string(),
        "config: llm.extraction_standard.fallback[0] = \"missing\" is invalid: name an [llm.*] section that exists; add [llm.missing] or remove it"
    );
    let mut chained = llm(ProviderKind::Openai, LanePolicy::Auto);
    chained.fallback = vec!["extraction_standard".to_owned()];
    config.llm.insert("missing".to_owned(), chained);
    assert!(
        config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("a fallback section has no fallback of its own"),
    );
}

#[test]
fn an_unresolvable_tier_key_stops_the_router_with_one_line() {
    let mut config = config(&[("standard", llm(ProviderKind::Heuristic, LanePolicy::Auto))]);
    config.billing.tiers.push("premium".to_owned());
    let error = Router::new(
        &config,
        Arc::new(ColumnBilling {
            default_tier: "standard".into(),
        }),
    )
    .unwrap_err();
    assert!(matches!(error, RoutingError::Config(_)));
    assert_eq!(
        error.to_string(),
        "config: no [llm.extraction_premium] section, but tier `premium` reaches purpose `extraction`; add [llm.extraction_premium] or remove `premium` from billing.tiers"
    );
}

#[test]
fn an_invalid_llm_section_stops_the_router_with_one_line() {
    let mut broken = llm(ProviderKind::Anthropic, LanePolicy::Auto);
    broken.model = None;
    broken.max_tokens = 0;
    let config = config(&[("standard", broken)]);
    let error = Router::new(
        &config,
        Arc::new(ColumnBilling {
            default_tier: "standard".into(),
        }),
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(!text.contains('\n'));
    assert_eq!(
        text,
        "llm.extraction_standard.model is unset; name the model, e.g. model = \"claude-haiku-4-5\"; llm.extraction_standard.max_tokens = 0 is invalid; use at least 1 (default 8192)"
    );
}

#[test]
fn an_unknown_tier_at_run_time_is_a_clear_error_and_billing_decides_the_tier() {
    let config = config(&[("standard", llm(ProviderKind::Heuristic, LanePolicy::Auto))]);
    let router = router(&config);
    let error = router.route(Purpose::Extraction, "gold", false, t0()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "billing tier `gold` is not in billing.tiers [\"standard\"]; add it (with its [llm.*] sections) or fix the user's billing_tier"
    );
    assert_eq!(router.tier_of(None), "standard");
    assert_eq!(router.tier_of(Some("gold")), "gold");
}
