//! What the docs promise is what is served: every metric name of docs/metrics.md with values from
//! the store, and exactly the routes of docs/openapi.json.

use memsift::api::route_list;
use reqwest::StatusCode;
use serde_json::Value;

use super::client::{ingest_extract_list, sample, with_api};
use crate::helpers::TestApp;

#[tokio::test]
async fn metrics_serve_every_documented_name_with_store_values() {
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        let response = api
            .http
            .get(format!("{}/metrics", api.base))
            .bearer_auth(super::client::TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let text = response.text().await.unwrap();
        let documented =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md")).unwrap();
        for name in memsift::metrics::METRIC_NAMES {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} missing from /metrics:\n{text}"
            );
            assert!(
                documented.contains(&format!("`{name}`")),
                "{name} missing from docs/metrics.md"
            );
        }
        assert_eq!(
            sample(&text, "memsift_segments{status=\"extracted\"}"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(sample(&text, "memsift_segments{status=\"dead\"}"), Some(0.0), "{text}");
        assert_eq!(sample(&text, "memsift_dead_letters"), Some(0.0));
        // Every drop reason is present (zero when unseen); no batch has ended on this lane.
        assert_eq!(
            sample(&text, "memsift_items_dropped_by_reason{reason=\"duplicate_by_vector\"}"),
            Some(0.0),
            "{text}"
        );
        assert_eq!(
            sample(&text, "memsift_batch_latency_seconds_count"),
            Some(0.0),
            "{text}"
        );
        assert_eq!(sample(&text, "memsift_memories_active"), Some(2.0));
        assert_eq!(
            sample(
                &text,
                "memsift_requests{lane=\"heuristic\",purpose=\"extraction\",status=\"applied\"}"
            ),
            Some(1.0),
            "{text}"
        );
        assert!(sample(&text, "memsift_items_dropped_total").is_some());
        // The heuristic lane spends nothing.
        assert_eq!(
            sample(&text, "memsift_cost_usd_total{purpose=\"extraction\"}"),
            Some(0.0),
            "{text}"
        );
        assert_eq!(sample(&text, "memsift_up"), Some(1.0));
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_served_routes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    let document: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut documented: Vec<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(|method| (method.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    documented.sort();
    let mut served = route_list();
    served.sort();
    assert_eq!(served, documented, "docs/openapi.json and api::routes() differ");

    // What the server sends at /openapi.json is the committed file.
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move {
        let (status, served_document) = api.get("/openapi.json").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(served_document, document);
        let (status, error) = api.get("/v1/nothing-here").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(error["error"].is_string());
    })
    .await;
    test.finish().await;
}
