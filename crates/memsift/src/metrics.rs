//! `GET /metrics`: store totals rendered in the Prometheus text format at scrape time.
//!
//! Every value is read from the store when scraped, so several daemons on one PostgreSQL database
//! report the same numbers and nothing is lost on restart; only the embedder's three metrics, the
//! search indexes' six and the segment claims' two are the serving process's own (whether it holds
//! the model, how often it loaded it, how many texts it embedded and why; what its search indexes
//! hold against their budget and how each was found; how many segments it claimed and how long
//! each claim statement took). The names are
//! documented in docs/metrics.md; the API test checks each is present.
//!
//! Every label value comes from a closed set (a status, purpose, lane, temporal kind, drop reason,
//! breaker state), read back through its type, so no id, memory text or stage note can become a
//! label and the number of series is bounded; a stored value outside its set is left out (it is a
//! corrupt row, which the listings report). The lane gauge's `model` and `endpoint` are the
//! operator's configuration (the endpoint without its credentials).

use memsift_core::drops::DropReason;
use memsift_core::status::{Lane, Purpose, RequestStatus, SegmentStatus, Temporal};
use memsift_engine::app::App;
use memsift_engine::claims::{CLAIM_BUCKETS_SECS, ClaimSnapshot};
use memsift_engine::embedding::EmbedPurpose;
use memsift_engine::held::HeldStats;
use memsift_store::{LaneHealthRow, MetricsSnapshot};
use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

/// Every metric name this endpoint serves (the README and test list the same).
pub const METRIC_NAMES: [&str; 24] = [
    "memsift_segments",
    "memsift_dead_letters",
    "memsift_requests",
    "memsift_tokens_total",
    "memsift_cost_usd_total",
    "memsift_items_dropped_total",
    "memsift_memories_active",
    "memsift_memories_written",
    "memsift_items_dropped_by_reason",
    "memsift_batch_latency_seconds",
    "memsift_lanes_unhealthy",
    "memsift_lanes_paused",
    "memsift_up",
    "memsift_embedder_loaded",
    "memsift_embedder_loads_total",
    "memsift_texts_embedded_total",
    "memsift_search_held_bytes",
    "memsift_search_held_budget_bytes",
    "memsift_search_held_users",
    "memsift_search_index_reads_total",
    "memsift_search_held_evictions_total",
    "memsift_search_held_oversize_total",
    "memsift_segments_claimed_total",
    "memsift_segment_claim_seconds",
];

/// What the serving process keeps itself (its embedder, search indexes and segment claims), as
/// `/metrics` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessState {
    /// Whether the model is loaded now.
    pub loaded: bool,
    /// How many times this process loaded it.
    pub n_loads: u64,
    /// Texts this process handed to it, per purpose, in the order of `EmbedPurpose::ALL`.
    pub texts_embedded: [u64; EmbedPurpose::ALL.len()],
    /// What its search indexes hold and how each was found.
    pub held: HeldStats,
    /// Its segment claims.
    pub claims: ClaimSnapshot,
}

impl ProcessState {
    /// The state of `app`'s embedder, search indexes and claims now.
    pub fn of(app: &App) -> ProcessState {
        let vectors = &app.vectors;
        ProcessState {
            loaded: vectors.is_loaded(),
            n_loads: vectors.n_loads(),
            texts_embedded: EmbedPurpose::ALL.map(|purpose| vectors.n_embedded(purpose)),
            held: app.held.stats(),
            claims: app.claims.snapshot(),
        }
    }
}

/// How a search index was found, the `outcome` label of `memsift_search_index_reads_total`.
pub const INDEX_READ_OUTCOMES: [&str; 3] = ["hit", "forward", "build"];

/// The per-lane breaker gauge: served once a lane's breaker has changed at least once.
pub const LANE_BREAKER_METRIC: &str = "memsift_lane_breaker_state";

/// Breaker states, so each lane reports all three (one of them 1).
const BREAKER_STATES: [&str; 3] = ["closed", "open", "half_open"];

/// Batch latency buckets: the batch APIs promise 24 h and usually take minutes to hours.
const LATENCY_BUCKETS_SECS: [f64; 9] = [
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    4.0 * 3600.0,
    12.0 * 3600.0,
    24.0 * 3600.0,
    48.0 * 3600.0,
];

/// Renders the snapshot, the provider lanes' last known breaker states and this process's
/// embedder as Prometheus text (format 0.0.4).
pub fn render(
    snapshot: &MetricsSnapshot,
    lanes: &[LaneHealthRow],
    process: ProcessState,
) -> prometheus::Result<String> {
    let registry = Registry::new();
    register_lanes(&registry, lanes)?;
    register_segments(&registry, snapshot)?;
    register_requests(&registry, snapshot)?;
    register_items_and_memories(&registry, snapshot)?;
    register_batch_latency(&registry, snapshot)?;
    register_embedder(&registry, process)?;
    register_held(&registry, process.held)?;

    let up = IntGauge::new("memsift_up", "1 when the store answered this scrape.")?;
    up.set(1);
    registry.register(Box::new(up))?;

    let mut buffer = Vec::new();
    TextEncoder::new().encode(&registry.gather(), &mut buffer)?;
    let mut text = String::from_utf8(buffer).unwrap_or_default();
    render_claims(&mut text, process.claims);
    Ok(text)
}

/// This process's segment claims, in the text format by hand: the counts are kept by the engine
/// (which does not depend on prometheus) and a prometheus histogram cannot be built from counts.
fn render_claims(text: &mut String, claims: ClaimSnapshot) {
    use std::fmt::Write;
    let _ = writeln!(
        text,
        "# HELP memsift_segments_claimed_total Segments this process claimed for planning.\n\
         # TYPE memsift_segments_claimed_total counter\n\
         memsift_segments_claimed_total {}",
        claims.n_segments
    );
    let _ = writeln!(
        text,
        "# HELP memsift_segment_claim_seconds Time of each segment claim statement this process ran (including those that found nothing).\n\
         # TYPE memsift_segment_claim_seconds histogram"
    );
    for (bound, n) in CLAIM_BUCKETS_SECS.iter().zip(claims.at_most) {
        let _ = writeln!(text, "memsift_segment_claim_seconds_bucket{{le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(
        text,
        "memsift_segment_claim_seconds_bucket{{le=\"+Inf\"}} {n}\n\
         memsift_segment_claim_seconds_sum {sum}\n\
         memsift_segment_claim_seconds_count {n}",
        n = claims.n_claims,
        sum = claims.sum_secs
    );
}

/// Segments by status (every status present, 0 when none) and the dead ones again as dead letters.
fn register_segments(registry: &Registry, snapshot: &MetricsSnapshot) -> prometheus::Result<()> {
    let segments = IntGaugeVec::new(Opts::new("memsift_segments", "Segments by status."), &["status"])?;
    for status in SegmentStatus::ALL {
        segments.with_label_values(&[status.as_str()]).set(0);
    }
    let mut dead = 0;
    for (status, count) in &snapshot.segments_by_status {
        let Ok(status) = SegmentStatus::parse(status) else {
            continue;
        };
        segments.with_label_values(&[status.as_str()]).set(*count);
        if status == SegmentStatus::Dead {
            dead = *count;
        }
    }
    registry.register(Box::new(segments))?;

    let dead_letters = IntGauge::new(
        "memsift_dead_letters",
        "Segments that ran out of attempts (status dead); each needs an operator.",
    )?;
    dead_letters.set(dead);
    registry.register(Box::new(dead_letters))?;
    Ok(())
}

/// Request attempts by status, purpose and lane, and the tokens and cost they recorded.
fn register_requests(registry: &Registry, snapshot: &MetricsSnapshot) -> prometheus::Result<()> {
    let requests = IntGaugeVec::new(
        Opts::new("memsift_requests", "LLM request attempts by status, purpose and lane."),
        &["status", "purpose", "lane"],
    )?;
    for (status, purpose, lane, count) in &snapshot.requests {
        let (Ok(status), Ok(purpose), Ok(lane)) =
            (RequestStatus::parse(status), Purpose::parse(purpose), Lane::parse(lane))
        else {
            continue;
        };
        requests
            .with_label_values(&[status.as_str(), purpose.as_str(), lane.as_str()])
            .set(*count);
    }
    registry.register(Box::new(requests))?;

    // Token and cost sums only grow (request rows are never deleted), so they are counters.
    let tokens = IntCounterVec::new(
        Opts::new(
            "memsift_tokens_total",
            "Tokens over every request, by purpose and kind.",
        ),
        &["purpose", "kind"],
    )?;
    let cost = prometheus::CounterVec::new(
        Opts::new(
            "memsift_cost_usd_total",
            "Recorded cost in USD over every request, by purpose.",
        ),
        &["purpose"],
    )?;
    for usage in &snapshot.usage_by_purpose {
        let Ok(purpose) = Purpose::parse(&usage.purpose) else {
            continue;
        };
        let purpose = purpose.as_str();
        for (kind, value) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_creation", usage.cache_creation_tokens),
            ("cache_read", usage.cache_read_tokens),
        ] {
            tokens
                .with_label_values(&[purpose, kind])
                .inc_by(u64::try_from(value).unwrap_or(0));
        }
        cost.with_label_values(&[purpose]).inc_by(usage.cost_usd.max(0.0));
    }
    registry.register(Box::new(tokens))?;
    registry.register(Box::new(cost))?;
    Ok(())
}

/// What extraction kept and dropped: drops in total and by reason, memories active and held.
fn register_items_and_memories(registry: &Registry, snapshot: &MetricsSnapshot) -> prometheus::Result<()> {
    let dropped = IntCounter::new(
        "memsift_items_dropped_total",
        "Extracted items dropped by validation or dedupe, over every request.",
    )?;
    dropped.inc_by(u64::try_from(snapshot.items_dropped).unwrap_or(0));
    registry.register(Box::new(dropped))?;

    let memories = IntGauge::new("memsift_memories_active", "Active (not archived) memories.")?;
    memories.set(snapshot.memories_active);
    registry.register(Box::new(memories))?;

    // A gauge: erasing a user deletes their memories, so the count can step down.
    let written = IntGaugeVec::new(
        Opts::new(
            "memsift_memories_written",
            "Memories held (active or archived) by temporal kind and sensitivity.",
        ),
        &["temporal", "sensitive"],
    )?;
    for temporal in Temporal::ALL {
        for sensitive in ["true", "false"] {
            written.with_label_values(&[temporal.as_str(), sensitive]).set(0);
        }
    }
    for (temporal, sensitive, count) in &snapshot.memories_by_kind {
        let Ok(temporal) = Temporal::parse(temporal) else {
            continue;
        };
        let sensitive = if *sensitive { "true" } else { "false" };
        written.with_label_values(&[temporal.as_str(), sensitive]).set(*count);
    }
    registry.register(Box::new(written))?;

    // A gauge, not a counter: erasing a user scrubs their drop records, so the total can step down.
    let drops = IntGaugeVec::new(
        Opts::new(
            "memsift_items_dropped_by_reason",
            "Drop records held with requests, by reason; duplicate_* and near_duplicate_* are the dedupe hits.",
        ),
        &["reason"],
    )?;
    for reason in DropReason::ALL {
        drops.with_label_values(&[reason.as_str()]).set(0);
    }
    for (reason, count) in &snapshot.drops_by_reason {
        let Some(reason) = DropReason::parse(reason) else {
            continue;
        };
        drops.with_label_values(&[reason.as_str()]).set(*count);
    }
    registry.register(Box::new(drops))?;
    Ok(())
}

/// Submission-to-end latency of every batch that ended.
fn register_batch_latency(registry: &Registry, snapshot: &MetricsSnapshot) -> prometheus::Result<()> {
    let latency = prometheus::Histogram::with_opts(
        prometheus::HistogramOpts::new(
            "memsift_batch_latency_seconds",
            "Seconds from a batch's submission to the provider ending it, over every batch that ended.",
        )
        .buckets(LATENCY_BUCKETS_SECS.to_vec()),
    )?;
    for seconds in &snapshot.batch_latencies_secs {
        latency.observe(*seconds);
    }
    registry.register(Box::new(latency))?;
    Ok(())
}

/// This process's embedder: whether it holds the model now and how often it loaded it.
fn register_embedder(registry: &Registry, embedder: ProcessState) -> prometheus::Result<()> {
    let loaded = IntGauge::new(
        "memsift_embedder_loaded",
        "1 while this process holds the embedding model in memory, 0 once released (or before first use).",
    )?;
    loaded.set(i64::from(embedder.loaded));
    registry.register(Box::new(loaded))?;
    let loads = IntCounter::new(
        "memsift_embedder_loads_total",
        "Times this process loaded the embedding model (at first need, and again after each idle release).",
    )?;
    loads.inc_by(embedder.n_loads);
    registry.register(Box::new(loads))?;
    let texts = IntCounterVec::new(
        Opts::new(
            "memsift_texts_embedded_total",
            "Texts this process handed to the embedder, by why: turn (search indexing), item (an answer's item at apply), query (a search), memory (a memory that had no vector of this model).",
        ),
        &["purpose"],
    )?;
    for (purpose, n) in EmbedPurpose::ALL.into_iter().zip(embedder.texts_embedded) {
        texts.with_label_values(&[purpose.as_str()]).inc_by(n);
    }
    registry.register(Box::new(texts))?;
    Ok(())
}

/// This process's search indexes: what they hold against `[search] held_mb`, and how each index a
/// search or an apply used was found (held and current, brought forward, read whole).
fn register_held(registry: &Registry, held: HeldStats) -> prometheus::Result<()> {
    let gauges = [
        (
            "memsift_search_held_bytes",
            "Bytes this process's per-user search indexes (vectors and lexicons) hold now.",
            held.held_bytes,
        ),
        (
            "memsift_search_held_budget_bytes",
            "[search] held_mb in bytes: what the held indexes may hold together.",
            held.budget_bytes,
        ),
        (
            "memsift_search_held_users",
            "Users with search indexes held in this process now.",
            held.users,
        ),
    ];
    for (name, help, value) in gauges {
        let gauge = IntGauge::new(name, help)?;
        gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        registry.register(Box::new(gauge))?;
    }
    let reads = IntCounterVec::new(
        Opts::new(
            "memsift_search_index_reads_total",
            "Per-user search indexes used, by how: hit (held and current), forward (brought forward by what changed), build (read whole).",
        ),
        &["outcome"],
    )?;
    for (outcome, n) in INDEX_READ_OUTCOMES
        .into_iter()
        .zip([held.hits, held.forwards, held.builds])
    {
        reads.with_label_values(&[outcome]).inc_by(n);
    }
    registry.register(Box::new(reads))?;
    let counters = [
        (
            "memsift_search_held_evictions_total",
            "Users whose held search indexes were dropped to stay under [search] held_mb (least recently searched first).",
            held.evictions,
        ),
        (
            "memsift_search_held_oversize_total",
            "Indexes not held because their user alone passes [search] held_mb (each of their searches reads them whole).",
            held.oversize,
        ),
    ];
    for (name, help, value) in counters {
        let counter = IntCounter::new(name, help)?;
        counter.inc_by(value);
        registry.register(Box::new(counter))?;
    }
    Ok(())
}

/// Each lane's breaker (1 on its state), whether a setting fault holds it, and the totals.
fn register_lanes(registry: &Registry, lanes: &[LaneHealthRow]) -> prometheus::Result<()> {
    let labels = ["lane", "provider", "model", "endpoint"];
    let state = IntGaugeVec::new(
        Opts::new(
            LANE_BREAKER_METRIC,
            "Each provider lane's circuit breaker as last recorded: 1 on its state (closed, open, half_open).",
        ),
        &[&labels[..], &["state", "setting_fault"]].concat(),
    )?;
    let (mut unhealthy, mut paused) = (0, 0);
    for row in lanes {
        let (Ok(lane), Some(provider)) = (Lane::parse(&row.lane), provider_name(&row.provider)) else {
            continue;
        };
        let endpoint = memsift_core::redact::redact_url(&row.endpoint);
        let setting_fault = if row.setting_fault { "true" } else { "false" };
        for name in BREAKER_STATES {
            state
                .with_label_values(&[lane.as_str(), provider, &row.model, &endpoint, name, setting_fault])
                .set(i64::from(row.state == name));
        }
        unhealthy += i64::from(row.state != "closed");
        paused += i64::from(row.state != "closed" && row.setting_fault);
    }
    registry.register(Box::new(state))?;
    let open = IntGauge::new(
        "memsift_lanes_unhealthy",
        "Provider lanes whose breaker is open or half-open (outages or setting faults).",
    )?;
    open.set(unhealthy);
    registry.register(Box::new(open))?;
    let held = IntGauge::new(
        "memsift_lanes_paused",
        "Provider lanes paused by a setting fault (key, base URL, model, quota): their work waits for an operator.",
    )?;
    held.set(paused);
    registry.register(Box::new(held))?;
    Ok(())
}

/// The provider's name from the closed set of kinds that have lanes.
fn provider_name(stored: &str) -> Option<&'static str> {
    use memsift_core::config::ProviderKind;
    [
        ProviderKind::Anthropic,
        ProviderKind::Openai,
        ProviderKind::OpenaiCompatible,
    ]
    .into_iter()
    .map(ProviderKind::as_str)
    .find(|name| *name == stored)
}
