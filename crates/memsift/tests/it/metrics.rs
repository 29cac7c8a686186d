//! `/metrics` labels come from closed sets: a generator fills the store's totals with arbitrary
//! text where statuses, purposes, lanes, kinds and drop reasons belong (ids, memory texts, stage
//! notes, the model's reasoning) and checks that every label value rendered is one of the closed
//! set's, that the number of series stays under its bound, and that items dropped are counted as
//! given.

use std::collections::BTreeSet;

use chrono::{TimeZone, Utc};
use memsift::metrics::{ProcessState, render};
use memsift_core::drops::DropReason;
use memsift_core::status::{Lane, Purpose, RequestStatus, SegmentStatus, Temporal};
use memsift_engine::embedding::EmbedPurpose;
use memsift_store::{LaneHealthRow, MetricsSnapshot, UsageTotals};
use proptest::prelude::*;

/// Text as it may sit where a closed word belongs: a valid word, an id, a note, anything.
fn word(valid: Vec<&'static str>) -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(valid).prop_map(str::to_owned),
        "[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}",
        "(kept|merged|no change): [A-Za-z ,.\"'{}=\\\\]{0,60}",
        any::<String>(),
    ]
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|value| name(*value)).collect()
}

/// The models and endpoints a configuration names: the lane gauge's only open labels.
const MODELS: [&str; 2] = ["claude-haiku-4-5", "gpt-4o-mini"];
const ENDPOINTS: [&str; 2] = ["https://api.anthropic.com/", "http://127.0.0.1:8080/"];

fn lane_row() -> impl Strategy<Value = LaneHealthRow> {
    (
        word(names(Lane::ALL, Lane::as_str)),
        word(vec!["anthropic", "openai", "openai_compatible"]),
        prop::sample::select(MODELS.to_vec()),
        prop::sample::select(ENDPOINTS.to_vec()),
        word(vec!["closed", "open", "half_open"]),
        any::<bool>(),
        any::<String>(),
    )
        .prop_map(
            |(lane, provider, model, endpoint, state, setting_fault, reason)| LaneHealthRow {
                lane,
                provider,
                model: model.to_owned(),
                endpoint: endpoint.to_owned(),
                state,
                setting_fault,
                reason: Some(reason),
                fix: None,
                opened_at: None,
                next_probe_at: None,
                changed_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
                changed_by: "worker".to_owned(),
                n_transitions: 1,
            },
        )
}

fn snapshot() -> impl Strategy<Value = MetricsSnapshot> {
    let count = 0i64..1000;
    (
        prop::collection::vec(
            (word(names(SegmentStatus::ALL, SegmentStatus::as_str)), count.clone()),
            0..12,
        ),
        prop::collection::vec(
            (
                word(names(RequestStatus::ALL, RequestStatus::as_str)),
                word(names(Purpose::ALL, Purpose::as_str)),
                word(names(Lane::ALL, Lane::as_str)),
                count.clone(),
            ),
            0..12,
        ),
        prop::collection::vec(word(names(Purpose::ALL, Purpose::as_str)), 0..6),
        prop::collection::vec(
            (
                word(names(Temporal::ALL, Temporal::as_str)),
                any::<bool>(),
                count.clone(),
            ),
            0..8,
        ),
        prop::collection::vec(
            (word(names(&DropReason::ALL, DropReason::as_str)), count.clone()),
            0..16,
        ),
        count,
    )
        .prop_map(
            |(segments, requests, purposes, kinds, drops, items_dropped)| MetricsSnapshot {
                segments_by_status: segments,
                requests,
                usage_by_purpose: purposes
                    .into_iter()
                    .map(|purpose| UsageTotals {
                        purpose,
                        input_tokens: 1,
                        ..UsageTotals::default()
                    })
                    .collect(),
                items_dropped,
                memories_active: 0,
                memories_by_kind: kinds,
                drops_by_reason: drops,
                batch_latencies_secs: vec![],
            },
        )
}

/// Every `(label, value)` of the rendered series, and how many series there are.
fn labels(text: &str) -> (Vec<(String, String)>, usize) {
    let mut pairs = Vec::new();
    let mut n_series = 0;
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        n_series += 1;
        let Some((_, rest)) = line.split_once('{') else {
            continue;
        };
        let inside = &rest[..rest.rfind('}').unwrap()];
        for pair in inside.split("\",").filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once("=\"").unwrap();
            pairs.push((name.to_owned(), value.trim_end_matches('"').to_owned()));
        }
    }
    (pairs, n_series)
}

fn allowed(label: &str) -> BTreeSet<&'static str> {
    let set: Vec<&'static str> = match label {
        "status" => names(SegmentStatus::ALL, SegmentStatus::as_str)
            .into_iter()
            .chain(names(RequestStatus::ALL, RequestStatus::as_str))
            .collect(),
        // A request's purpose, or why a text was embedded.
        "purpose" => names(Purpose::ALL, Purpose::as_str)
            .into_iter()
            .chain(names(&EmbedPurpose::ALL, EmbedPurpose::as_str))
            .collect(),
        "lane" => names(Lane::ALL, Lane::as_str),
        "kind" => vec!["input", "output", "cache_creation", "cache_read"],
        "reason" => names(&DropReason::ALL, DropReason::as_str),
        "temporal" => names(Temporal::ALL, Temporal::as_str),
        "sensitive" | "setting_fault" => vec!["true", "false"],
        "state" => vec!["closed", "open", "half_open"],
        "provider" => vec!["anthropic", "openai", "openai_compatible"],
        "model" => MODELS.to_vec(),
        "endpoint" => ENDPOINTS.to_vec(),
        "outcome" => memsift::metrics::INDEX_READ_OUTCOMES.to_vec(),
        "le" => vec![],
        other => panic!("a label no closed set covers: {other}"),
    };
    set.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_label_value_is_from_its_closed_set_and_the_series_are_bounded(
        snapshot in snapshot(),
        lanes in prop::collection::vec(lane_row(), 0..6),
    ) {
        let text = render(&snapshot, &lanes, ProcessState::default()).unwrap();
        let (pairs, n_series) = labels(&text);
        for (label, value) in &pairs {
            if label == "le" {
                continue;
            }
            prop_assert!(allowed(label).contains(value.as_str()), "{label}=\"{value}\" is not in its closed set");
        }
        // The bound: every closed combination once, the lanes a configuration can name, and the
        // fixed series (histogram buckets, totals, gauges).
        let lane_series = Lane::ALL.len() * 3 * MODELS.len() * ENDPOINTS.len() * 3 * 2;
        let bound = SegmentStatus::ALL.len()
            + RequestStatus::ALL.len() * Purpose::ALL.len() * Lane::ALL.len()
            + Purpose::ALL.len() * 5
            + Temporal::ALL.len() * 2
            + DropReason::ALL.len()
            + lane_series
            + memsift::metrics::INDEX_READ_OUTCOMES.len()
            + 46;
        prop_assert!(n_series <= bound, "{n_series} series > {bound}");
        let dropped = text
            .lines()
            .find_map(|line| line.strip_prefix("memsift_items_dropped_total "))
            .unwrap();
        prop_assert_eq!(dropped.parse::<i64>().unwrap(), snapshot.items_dropped);
    }
}
