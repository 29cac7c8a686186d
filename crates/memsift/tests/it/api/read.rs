//! What comes back out: ana's memories listed after ingest and extract on SQLite and PostgreSQL,
//! and search returning the best match first and counting the access.

use reqwest::StatusCode;
use serde_json::json;

use super::client::{ingest_extract_list, sample, with_api};
use crate::helpers::{TestApp, t0};

#[tokio::test]
async fn ingest_extract_and_list_memories_on_sqlite() {
    let test = TestApp::sqlite().await;
    with_api(&test.app, |api| async move { ingest_extract_list(&api).await }).await;
    test.finish().await;
}

#[tokio::test]
async fn ingest_extract_and_list_memories_on_postgres() {
    let test = TestApp::postgres().await;
    let store = test.app.store.clone();
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        // The access update, the scoped close and the metrics sums (BIGINT casts) on PostgreSQL.
        let (status, found) = api.get("/v1/users/ana/memories/search?q=dog%20named%20Rex&k=1").await;
        assert_eq!(status, StatusCode::OK, "{found}");
        let rex = found["results"][0]["id"].as_str().unwrap().to_owned();
        assert_eq!(store.memory_access(&rex).await.unwrap().unwrap().0, 2);
        let segment = store.listing().list_segments(Some("ana"), None, None).await.unwrap()[0]
            .id
            .clone();
        let (status, _) = api
            .post(&format!("/v1/users/bo/segments/{segment}/close"), json!(null))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let text = api
            .http
            .get(format!("{}/metrics", api.base))
            .bearer_auth(super::client::TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(sample(&text, "memsift_memories_active"), Some(2.0), "{text}");
        assert_eq!(
            sample(&text, "memsift_segments{status=\"extracted\"}"),
            Some(1.0),
            "{text}"
        );
        assert!(
            sample(&text, "memsift_tokens_total{kind=\"input\",purpose=\"extraction\"}").is_some(),
            "{text}"
        );
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn search_returns_the_matching_memory_first_and_counts_the_access() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    let now = t0();
    with_api(&test.app, |api| async move {
        ingest_extract_list(&api).await;
        let memories = store.listing().list_memories("ana", None).await.unwrap();
        let rex = memories.iter().find(|m| m.text.contains("Rex")).unwrap().id.clone();
        let lisbon = memories.iter().find(|m| m.text.contains("Lisbon")).unwrap().id.clone();
        let before = store.memory_access(&rex).await.unwrap().unwrap().0;

        let (status, found) = api.get("/v1/users/ana/memories/search?q=dog%20named%20Rex&k=1").await;
        assert_eq!(status, StatusCode::OK, "{found}");
        let results = found["results"].as_array().unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["id"], json!(rex));
        assert_eq!(results[0]["text"], json!("The user has a dog named Rex."));
        assert!(results[0]["score"].as_f64().unwrap() > 0.0);
        // Every result says what it rests on and what ranked it.
        assert_eq!(results[0]["kind"], json!("memory"));
        assert_eq!(results[0]["evidence"][0]["role"], json!("user"));
        assert!(
            results[0]["evidence"][0]["text"].as_str().unwrap().contains("Rex"),
            "{found}"
        );
        assert!(
            !results[0]["parts"]["signals"].as_array().unwrap().is_empty(),
            "{found}"
        );

        let (access_count, last_accessed_at) = store.memory_access(&rex).await.unwrap().unwrap();
        assert_eq!(access_count, before + 1);
        assert_eq!(last_accessed_at, Some(now));
        // k = 1 returned only Rex: Lisbon was not read by the search.
        assert_eq!(store.memory_access(&lisbon).await.unwrap().unwrap().0, before);

        let (status, error) = api.get("/v1/users/ana/memories/search?k=3").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(error["error"].as_str().unwrap().contains("`q`"), "{error}");
        let (status, error) = api.get("/v1/users/ana/memories?limit=zero").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(error["error"].as_str().unwrap().contains("limit"), "{error}");
    })
    .await;
    test.finish().await;
}
