//! Provider health end to end against the simulator: setting faults pause a lane without spending
//! attempts, routes fail over in order and come back, `auto` leaves a batch lane that cannot
//! create, and persistent failure without a fallback ends `dead` instead of looping. Time is the
//! test's clock; every transition is driven step by step.

use chrono::Duration;
use memsift_core::Clock;
use memsift_core::config::Config;
use memsift_engine::pipeline::{run_once, run_until_idle};
use memsift_sim::{FaultConfig, HttpFault, SimConfig, SimHandle};
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, line};

/// Three users, one closed segment each.
fn conversations(prefix: &str) -> String {
    [
        line(
            &format!("{prefix}ana"),
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            true,
        ),
        line(
            &format!("{prefix}bo"),
            "c2",
            0,
            "user",
            "I work at Fernwood Labs.",
            true,
        ),
        line(
            &format!("{prefix}cy"),
            "c3",
            0,
            "user",
            "I love jazz and I hate cilantro.",
            true,
        ),
    ]
    .concat()
}

/// The test overlay: hashing embedder, fast batch timings, the given health settings and sections.
fn config(key_file: &std::path::Path, health: &str, sections: &str) -> Config {
    std::fs::write(key_file, "test-key").unwrap();
    let overlay = format!(
        "[embeddings]\nbackend = \"hashing\"\n\n[batch]\npack_max_wait_secs = 0\npoll_initial_secs = 30\n\
         reconcile_grace_secs = 300\n\n[health]\n{health}\n{}",
        sections.replace("KEY_FILE", &key_file.display().to_string())
    );
    Config::from_layers(Some(("test overlay", &overlay))).unwrap()
}

fn section(name: &str, provider: &str, endpoint: &str, model: &str, lane: &str, extra: &str) -> String {
    format!(
        "[llm.{name}]\nprovider = \"{provider}\"\nendpoint = \"{endpoint}\"\nmodel = \"{model}\"\n\
         api_key_file = \"KEY_FILE\"\nlane = \"{lane}\"\nmax_tokens = 4096\n{extra}\n"
    )
}

async fn sim_app(faults: FaultConfig, config_for: impl FnOnce(&SimHandle, &std::path::Path) -> Config) -> TestApp {
    let sim_config = SimConfig::from_cli("heuristic", None).unwrap().with_faults(faults);
    TestApp::on_sim(TestDb::sqlite().await, sim_config, config_for).await
}

/// An app whose extraction goes to the simulator's Anthropic immediate lane, with a 60 s
/// breaker cool-down.
async fn immediate_app(faults: FaultConfig) -> TestApp {
    sim_app(faults, |sim, key_file| {
        config(
            key_file,
            "cool_down_secs = 60",
            &section(
                "extraction_standard",
                "anthropic",
                &sim.base_url,
                "claude-haiku-4-5",
                "immediate",
                "",
            ),
        )
    })
    .await
}

async fn statuses(test: &TestApp) -> Vec<String> {
    let mut statuses: Vec<String> = test
        .app
        .store
        .listing()
        .list_segments(None, None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|segment| segment.status)
        .collect();
    statuses.sort();
    statuses
}

/// Steps the pipeline at the current time until a step moves nothing.
async fn settle(test: &TestApp) {
    for _ in 0..20 {
        if !run_once(&test.app).await.unwrap().progressed() {
            return;
        }
    }
    panic!("the pipeline kept moving for 20 steps at one instant");
}

#[tokio::test]
async fn an_openai_url_without_v1_pauses_the_lane_spends_nothing_and_stops_run_until_idle_with_the_fix() {
    let test = sim_app(FaultConfig::default(), |sim, key_file| {
        // The mistake: the simulator's OpenAI API lives under /v1.
        config(
            key_file,
            "",
            &section(
                "extraction_standard",
                "openai",
                &sim.base_url,
                "gpt-4o-mini",
                "batch",
                "",
            ),
        )
    })
    .await;
    test.import("chat.jsonl", &conversations("")).await.unwrap();
    let error = format!("{:#}", run_until_idle(&test.app).await.unwrap_err());
    let lane = format!("lane batch openai/gpt-4o-mini at {}", test.sim().base_url);
    assert!(
        error.contains(&format!("{lane} is paused by a setting fault")),
        "{error}"
    );
    assert!(
        error.contains(&format!(
            "likely fix: OpenAI base URLs end in /v1 (e.g. https://api.openai.com/v1); set llm.extraction_standard.endpoint = \"{}/v1\"",
            test.sim().base_url
        )),
        "{error}"
    );
    assert!(!error.contains("test-key"), "errors never carry the key");
    // The fault was found before any search indexing: embedding the turns waits behind the lanes.
    assert_eq!(
        test.app
            .vectors
            .n_embedded(memsift_engine::embedding::EmbedPurpose::Turn),
        0
    );
    // Nothing was spent and nothing died: every request waits on its first attempt.
    assert_eq!(statuses(&test).await, vec!["extracting"; 3]);
    for segment in test.app.store.listing().list_segments(None, None, None).await.unwrap() {
        assert!(
            segment
                .last_error
                .as_deref()
                .unwrap_or_default()
                .starts_with(&format!("waiting: {lane} paused")),
            "{segment:?}"
        );
    }
    let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .all(|request| request.status == "planned" && request.attempt == 1)
    );
    // One upload was tried; the paused lane sent nothing more, and the batch says why.
    let batches = test.app.store.batches().list_batches(None, None).await.unwrap();
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].status, "failed");
    assert!(
        batches[0]
            .last_error
            .as_deref()
            .unwrap_or_default()
            .starts_with(&format!("{lane} paused: ")),
        "{batches:?}"
    );
    let health = test.app.store.lanes().lane_health().await.unwrap();
    assert_eq!(health.len(), 1);
    assert_eq!((health[0].state.as_str(), health[0].setting_fault), ("open", true));
    assert!(health[0].fix.as_deref().unwrap_or_default().contains("end in /v1"));
    // What `memsift batches`, `memsift segments` and the admin pages print under their tables.
    let lines = memsift_engine::health::describe_unhealthy(&health);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with(&format!("{lane} is paused by a setting fault (open) since ")),
        "{lines:?}"
    );
    assert!(
        lines[0].contains("likely fix: OpenAI base URLs end in /v1"),
        "{lines:?}"
    );
    let snapshot = test.app.store.listing().metrics_snapshot().await.unwrap();
    let metrics = memsift::metrics::render(&snapshot, &health, memsift::metrics::ProcessState::default()).unwrap();
    let series = format!(
        "memsift_lane_breaker_state{{endpoint=\"{}/\",lane=\"batch\",model=\"gpt-4o-mini\",provider=\"openai\",setting_fault=\"true\",state=\"open\"}} 1",
        // The endpoint label is the URL as parsed and redacted: an empty path reads as `/`.
        test.sim().base_url.trim_end_matches('/')
    );
    assert!(metrics.contains(&series), "{metrics}");
    assert!(metrics.contains("memsift_lanes_paused 1"), "{metrics}");
    assert!(metrics.contains("memsift_segments{status=\"dead\"} 0"), "{metrics}");
    test.finish().await;
}

#[tokio::test]
async fn check_config_probe_reports_each_section_reachable_or_not_and_why() {
    let faults = FaultConfig {
        unknown_models: vec!["llama-missing".to_owned()],
        ..FaultConfig::default()
    };
    let test = sim_app(faults, |sim, key_file| {
        let wrong_key = key_file.with_file_name("wrong-key");
        std::fs::write(&wrong_key, "not-the-key").unwrap();
        let sections = [
            section(
                "extraction_standard",
                "anthropic",
                &sim.base_url,
                "claude-haiku-4-5",
                "batch",
                "",
            ),
            section("no_v1", "openai", &sim.base_url, "gpt-4o-mini", "batch", ""),
            section(
                "local",
                "openai_compatible",
                &sim.openai_base_url(),
                "llama-missing",
                "immediate",
                "",
            ),
            section(
                "revoked",
                "openai",
                &sim.openai_base_url(),
                "gpt-4o-mini",
                "immediate",
                "",
            )
            .replace("KEY_FILE", &wrong_key.display().to_string()),
        ];
        config(key_file, "", &sections.concat())
    })
    .await;
    let reports = memsift::probe::probe_all(&test.app.config).await.unwrap();
    let lines: Vec<String> = reports.iter().map(memsift::probe::ProbeReport::line).collect();
    eprintln!("{}", lines.join("\n"));
    let line = |section: &str| {
        lines
            .iter()
            .find(|line| line.starts_with(&format!("llm.{section}:")))
            .unwrap()
    };
    assert!(
        line("extraction_standard").ends_with(": reachable (model claude-haiku-4-5 known, batch list answered)"),
        "{lines:?}"
    );
    assert!(line("no_v1").contains("NOT reachable"), "{lines:?}");
    assert!(
        line("no_v1").contains("likely fix: OpenAI base URLs end in /v1"),
        "{lines:?}"
    );
    assert!(
        line("local").contains("likely fix: the provider does not know model `llama-missing`"),
        "{lines:?}"
    );
    assert!(line("revoked").contains("not authorised (HTTP 401"), "{lines:?}");
    assert!(!lines.concat().contains("not-the-key") && !lines.concat().contains("test-key"));
    assert_eq!(reports.iter().filter(|report| report.reachable).count(), 1);
    test.finish().await;
}

#[tokio::test]
async fn a_404_burst_on_upload_pauses_the_lane_which_probes_with_backoff_and_resumes_by_itself() {
    let faults = FaultConfig {
        not_found: Some(HttpFault::first(2, "files.create")),
        ..FaultConfig::default()
    };
    let test = sim_app(faults, |sim, key_file| {
        config(
            key_file,
            "cool_down_secs = 60\nmax_cool_down_secs = 600",
            &section(
                "extraction_standard",
                "openai",
                &sim.openai_base_url(),
                "gpt-4o-mini",
                "batch",
                "",
            ),
        )
    })
    .await;
    test.import("chat.jsonl", &conversations("")).await.unwrap();
    let start = test.clock.now();
    settle(&test).await;
    let probe_times = |rows: &[memsift_store::LaneHealthRow]| rows[0].next_probe_at;
    let health = test.app.store.lanes().lane_health().await.unwrap();
    assert_eq!(probe_times(&health), Some(start + Duration::seconds(60)));
    // Before the probe time nothing is sent; at it, one probe fails and the wait doubles.
    test.advance(Duration::seconds(59));
    settle(&test).await;
    assert_eq!(test.sim().counters().faults["not_found"], 1);
    test.advance(Duration::seconds(1));
    settle(&test).await;
    assert_eq!(test.sim().counters().faults["not_found"], 2);
    let health = test.app.store.lanes().lane_health().await.unwrap();
    assert_eq!(probe_times(&health), Some(start + Duration::seconds(60 + 120)));
    // The next probe succeeds: the lane closes and the work goes on, never having spent an attempt.
    test.advance(Duration::seconds(120));
    run_until_idle(&test.app).await.unwrap();
    assert_eq!(statuses(&test).await, vec!["extracted"; 3]);
    let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
    assert!(requests.iter().all(|request| request.attempt == 1), "{requests:?}");
    let health = test.app.store.lanes().lane_health().await.unwrap();
    assert_eq!((health[0].state.as_str(), health[0].setting_fault), ("closed", false));
    test.finish().await;
}

#[tokio::test]
async fn a_revoked_key_on_the_immediate_lane_holds_requests_unspent_until_a_probe_succeeds() {
    let faults = FaultConfig {
        auth_error: Some(HttpFault::first(1, "messages")),
        ..FaultConfig::default()
    };
    let test = immediate_app(faults).await;
    test.import("chat.jsonl", &conversations("")).await.unwrap();
    let step = run_once(&test.app).await.unwrap();
    assert_eq!(step.n_requests_held, 3, "the 401 and the two behind it wait: {step:?}");
    assert_eq!(
        test.sim().counters().per_endpoint["messages"],
        1,
        "one call, then paused"
    );
    let error = format!("{:#}", run_until_idle(&test.app).await.unwrap_err());
    assert!(error.contains("lane immediate anthropic/claude-haiku-4-5"), "{error}");
    assert!(
        error.contains("check the API key of llm.extraction_standard"),
        "{error}"
    );
    test.advance(Duration::seconds(60));
    run_until_idle(&test.app).await.unwrap();
    assert_eq!(statuses(&test).await, vec!["extracted"; 3]);
    let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
    assert!(requests.iter().all(|request| request.attempt == 1), "{requests:?}");
    test.finish().await;
}

#[tokio::test]
async fn provider_outages_on_the_immediate_lane_spend_no_attempt_whatever_their_status() {
    // Before: every 5xx or exhausted 429 of an immediate call spent an attempt, so three in a row killed a segment
    // before the breaker (five outages) opened. Now the request waits for the lane's next probe,
    // unspent; with no other way, the run stops with the paused lane's line, and once the
    // provider answers everything is extracted on its first attempt.
    for (name, fault) in [("500", "server_error"), ("529", "overloaded"), ("429", "rate_limit")] {
        let burst = HttpFault {
            share: 1.0,
            endpoints: vec!["messages".to_owned()],
            ..HttpFault::default()
        };
        let faults = match fault {
            "server_error" => FaultConfig {
                server_error: Some(burst),
                ..FaultConfig::default()
            },
            "rate_limit" => FaultConfig {
                rate_limit: Some(HttpFault {
                    retry_after_ms: Some(1000),
                    ..burst
                }),
                ..FaultConfig::default()
            },
            _ => FaultConfig {
                overloaded: Some(burst),
                ..FaultConfig::default()
            },
        };
        let test = immediate_app(faults).await;
        test.import("chat.jsonl", &conversations("")).await.unwrap();
        // The client's own retries of each failing call wait on a virtual clock, not for seconds.
        let app = crate::helpers::with_virtual_retries(&test.app);
        let error = format!("{:#}", run_until_idle(&app).await.unwrap_err());
        assert!(
            error.contains("lane immediate anthropic/claude-haiku-4-5")
                && error.contains("is paused by an outage and its route has no other way"),
            "{name}: {error}"
        );
        assert!(statuses(&test).await.iter().all(|status| status != "dead"), "{name}");
        let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
        assert!(
            requests.iter().all(|request| request.attempt == 1),
            "{name}: {requests:?}"
        );
        // The provider answers again (a healthy simulator at a new address stands in for it).
        let healthy = memsift_sim::Sim::start(
            SimConfig::from_cli("heuristic", None)
                .unwrap()
                .with_api_key("test-key")
                .with_clock(std::sync::Arc::new(test.clock.clone())),
        )
        .await
        .unwrap();
        let mut config = test.app.config.clone();
        if let Some(section) = config.llm.get_mut("extraction_standard") {
            section.endpoint = Some(healthy.base_url.clone());
        }
        let recovered = crate::helpers::app_on(&test.app.store, &test.clock, config, "recovered");
        test.advance(Duration::minutes(30));
        run_until_idle(&recovered).await.unwrap();
        assert_eq!(statuses(&test).await, vec!["extracted"; 3], "{name}");
        let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
        assert!(
            requests.iter().all(|request| request.attempt == 1),
            "{name}: {requests:?}"
        );
        healthy.shutdown().await.unwrap();
        test.finish().await;
    }
}

#[tokio::test]
async fn a_batch_whose_every_request_names_an_unknown_model_is_a_setting_fault_not_three_attempts() {
    let faults = FaultConfig {
        unknown_models: vec!["claude-haiku-4-5".to_owned()],
        ..FaultConfig::default()
    };
    let test = sim_app(faults, |sim, key_file| {
        config(
            key_file,
            "",
            &section(
                "extraction_standard",
                "anthropic",
                &sim.base_url,
                "claude-haiku-4-5",
                "batch",
                "",
            ),
        )
    })
    .await;
    test.import("chat.jsonl", &conversations("")).await.unwrap();
    let error = format!("{:#}", run_until_idle(&test.app).await.unwrap_err());
    assert!(
        error.contains(
            "likely fix: the provider does not know model `claude-haiku-4-5`; set llm.extraction_standard.model to a model it serves"
        ),
        "{error}"
    );
    assert_eq!(statuses(&test).await, vec!["extracting"; 3]);
    let requests = test.app.store.listing().list_requests(None, None, None).await.unwrap();
    assert!(
        requests
            .iter()
            .all(|request| request.status == "planned" && request.attempt == 1),
        "{requests:?}"
    );
    test.finish().await;
}

#[tokio::test]
async fn without_a_way_forward_a_failing_create_pauses_the_lane_spends_nothing_and_stops_run_until_idle() {
    // The shipped [health] settings: a failing create is one outage like any other. Each failed
    // batch is looked for at once and again after a short recheck, its requests go again unspent,
    // the fifth failure opens the lane, the run waits for its first probe, and only when that
    // fails too does it stop, saying why.
    let faults = FaultConfig {
        server_error: Some(HttpFault {
            share: 1.0,
            endpoints: vec!["anthropic.batches.create".to_owned()],
            ..HttpFault::default()
        }),
        ..FaultConfig::default()
    };
    let test = sim_app(faults, |sim, key_file| {
        config(
            key_file,
            "",
            &section(
                "extraction_standard",
                "anthropic",
                &sim.base_url,
                "claude-haiku-4-5",
                "batch",
                "",
            ),
        )
    })
    .await;
    test.import("chat.jsonl", &conversations("")).await.unwrap();
    let error = run_until_idle(&test.app).await.unwrap_err().to_string();
    assert!(!error.contains('\n'), "one line: {error}");
    assert!(
        error.starts_with("lane batch anthropic/claude-haiku-4-5 at ")
            && error.contains("is paused by an outage and its route has no other way")
            && error.ends_with("no attempt was spent: run again once the provider answers, or add a fallback to the route (the daemon probes by itself)"),
        "{error}"
    );
    assert!(statuses(&test).await.iter().all(|status| status != "dead"));
    for request in test.app.store.listing().list_requests(None, None, None).await.unwrap() {
        assert_eq!(
            (request.attempt, request.status.as_str()),
            (1, "planned"),
            "{request:?}"
        );
    }
    let threshold = u64::from(test.app.config.health.failure_threshold);
    assert_eq!(
        test.sim().counters().per_endpoint["anthropic.batches.create"],
        threshold + 1,
        "the threshold's creates, then the probe"
    );
    test.finish().await;
}

#[tokio::test]
async fn auto_moves_work_from_a_batch_lane_that_cannot_create_to_the_immediate_lane() {
    let faults = FaultConfig {
        server_error: Some(HttpFault {
            share: 1.0,
            endpoints: vec!["anthropic.batches.create".to_owned()],
            ..HttpFault::default()
        }),
        ..FaultConfig::default()
    };
    let test = sim_app(faults, |sim, key_file| {
        config(
            key_file,
            "failure_threshold = 1\ncool_down_secs = 3600\nmax_cool_down_secs = 3600",
            &section(
                "extraction_standard",
                "anthropic",
                &sim.base_url,
                "claude-haiku-4-5",
                "auto",
                "",
            ),
        )
    })
    .await;
    test.import("first.jsonl", &conversations("")).await.unwrap();
    settle(&test).await;
    // The create failed: the lane is open, and new work goes straight to the immediate lane.
    test.import("second.jsonl", &conversations("later-")).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    assert_eq!(statuses(&test).await, vec!["extracted"; 6]);
    let counters = test.sim().counters();
    assert_eq!(
        counters.per_endpoint["anthropic.batches.create"], 1,
        "one failed create opened the lane"
    );
    assert_eq!(
        counters.per_endpoint["messages"], 6,
        "every segment answered on the immediate lane"
    );
    for request in test
        .app
        .store
        .listing()
        .list_requests(None, Some("applied"), None)
        .await
        .unwrap()
    {
        assert_eq!(request.lane, "immediate");
        // The first three were in the batch whose create failed: a provider's fault costs
        // them nothing.
        assert_eq!(request.attempt, 1, "{request:?}");
    }
    test.finish().await;
}

#[tokio::test]
async fn a_route_fails_over_to_the_next_provider_and_comes_back_when_the_first_recovers() {
    let faults = FaultConfig {
        server_error: Some(HttpFault::first(2, "anthropic.batches.create")),
        ..FaultConfig::default()
    };
    let test = sim_app(faults, |sim, key_file| {
        let primary = section(
            "extraction_standard",
            "anthropic",
            &sim.base_url,
            "claude-haiku-4-5",
            "batch",
            "fallback = [\"extraction_openai\"]",
        );
        let fallback = section(
            "extraction_openai",
            "openai",
            &sim.openai_base_url(),
            "gpt-4o-mini",
            "immediate",
            "",
        );
        config(
            key_file,
            "failure_threshold = 1\ncool_down_secs = 60",
            &format!("{primary}{fallback}"),
        )
    })
    .await;
    let start = test.clock.now();
    let mut log = Vec::new();
    let mut seen_transitions = std::collections::HashMap::new();
    let mut observe = async |test: &TestApp, log: &mut Vec<String>| {
        for row in test.app.store.lanes().lane_health().await.unwrap() {
            let name = format!("{} {}/{}", row.lane, row.provider, row.model);
            if seen_transitions.insert(name.clone(), row.n_transitions) != Some(row.n_transitions) {
                log.push(format!(
                    "t+{:>4}s  {name}: {}{}",
                    (row.changed_at - start).num_seconds(),
                    row.state,
                    row.reason.map(|reason| format!(" ({reason})")).unwrap_or_default()
                ));
            }
        }
    };
    // Two creates answer 500: the primary's batch lane (set to open at one outage) opens at the
    // first, and the second is its probe at minute 1, which fails and keeps it open twice as long.
    for (minute, prefix) in [(0, "a-"), (1, "b-")] {
        test.clock.set(start + Duration::minutes(minute));
        test.import(&format!("{prefix}.jsonl"), &conversations(prefix))
            .await
            .unwrap();
        settle(&test).await;
        observe(&test, &mut log).await;
    }
    // While it is open, new work goes to the next provider of the route.
    test.import("c.jsonl", &conversations("c-")).await.unwrap();
    settle(&test).await;
    observe(&test, &mut log).await;
    // After the cool-down (60 s, doubled by the failed probe at minute 1), new work goes back
    // to the first provider; its create is the probe.
    test.clock.set(start + Duration::minutes(3) + Duration::seconds(30));
    test.import("d.jsonl", &conversations("d-")).await.unwrap();
    settle(&test).await;
    observe(&test, &mut log).await;
    run_until_idle(&test.app).await.unwrap();
    observe(&test, &mut log).await;
    assert_eq!(statuses(&test).await, vec!["extracted"; 12]);

    let mut served = std::collections::BTreeMap::<String, Vec<String>>::new();
    for request in test
        .app
        .store
        .listing()
        .list_requests(None, Some("applied"), None)
        .await
        .unwrap()
    {
        let detail = test
            .app
            .store
            .listing()
            .request_detail(memsift_core::RequestId::parse(&request.id).unwrap())
            .await
            .unwrap();
        let prefix = request.user.split('-').next().unwrap_or_default().to_owned();
        served.entry(prefix).or_default().push(format!(
            "{} {} attempt {}",
            detail.config_key, detail.lane, detail.attempt
        ));
    }
    eprintln!("breaker transitions:\n  {}", log.join("\n  "));
    eprintln!("served by:");
    for (prefix, requests) in &served {
        eprintln!("  {prefix}: {requests:?}");
    }
    assert!(
        served["c"]
            .iter()
            .all(|line| line.starts_with("extraction_openai immediate")),
        "{served:?}"
    );
    assert!(
        served["d"]
            .iter()
            .all(|line| line.starts_with("extraction_standard batch")),
        "{served:?}"
    );
    // The two batches whose creates failed were found absent and cost their requests nothing.
    for prefix in ["a", "b"] {
        assert!(
            served[prefix].iter().all(|line| line.ends_with("attempt 1")),
            "{served:?}"
        );
    }
    assert!(
        log.iter()
            .any(|line| line.contains("batch anthropic/claude-haiku-4-5: open")),
        "{log:?}"
    );
    assert!(
        log.last()
            .is_some_and(|line| line.contains("batch anthropic/claude-haiku-4-5: closed")),
        "{log:?}"
    );
    test.finish().await;
}
