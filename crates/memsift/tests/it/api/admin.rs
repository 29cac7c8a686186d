//! The operator's routes: undo scoped by user, retry of a dead segment, erase only when confirmed,
//! and a batch cancel that reaches the provider.

use chrono::Duration;
use reqwest::StatusCode;
use serde_json::json;

use super::client::with_api;
use crate::helpers::TestApp;

#[tokio::test]
async fn erase_undo_and_retry_through_the_api_are_confirmed_scoped_and_reported() {
    let test = TestApp::sqlite().await;
    let (_, lisbon) = test
        .app
        .store
        .insert_test_memory("ana", "Ana lives in Lisbon.")
        .await
        .unwrap();
    test.app
        .store
        .insert_test_memory("bo", "Bo plays chess.")
        .await
        .unwrap();
    let revised = test
        .app
        .store
        .memories()
        .revise_memory(
            "ana",
            lisbon,
            &memsift_store::Revision::Expire,
            "she moved",
            test.app.clock.now(),
        )
        .await
        .unwrap();
    let dead = {
        test.import(
            "c.jsonl",
            &crate::helpers::line("ana", "c1", 0, "user", "I like tea.", true),
        )
        .await
        .unwrap();
        let segment = test
            .app
            .store
            .listing()
            .list_segments(Some("ana"), None, None)
            .await
            .unwrap()
            .remove(0);
        let claimed = test
            .app
            .store
            .segments()
            .claim_segment(segment.id.parse().unwrap(), "w", test.app.clock.now())
            .await
            .unwrap();
        test.app
            .store
            .segments()
            .fail_segment(claimed.id, "broken prompt", 0, Duration::zero(), test.app.clock.now())
            .await
            .unwrap();
        segment.id
    };
    let operation = revised.operation_id.to_string();
    with_api(&test.app, |api| async move {
        // Undo is scoped by user: bo cannot undo ana's operation.
        let (status, _) = api
            .post(&format!("/v1/users/bo/operations/{operation}/undo"), json!({}))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, undone) = api
            .post(&format!("/v1/users/ana/operations/{operation}/undo"), json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{undone}");
        let (status, again) = api
            .post(&format!("/v1/users/ana/operations/{operation}/undo"), json!({}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{again}");
        assert!(again["error"].as_str().unwrap().contains("already undone"), "{again}");

        let (status, retried) = api.post(&format!("/v1/admin/segments/{dead}/retry"), json!({})).await;
        assert_eq!((status, retried["status"].as_str()), (StatusCode::OK, Some("closed")));
        let (status, _) = api.post(&format!("/v1/admin/segments/{dead}/retry"), json!({})).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "only failed or dead segments are retried"
        );

        let (status, refused) = api.call("DELETE", "/v1/users/ana", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            refused["error"].as_str().unwrap().contains("confirm=erase"),
            "{refused}"
        );
        let (status, receipt) = api.call("DELETE", "/v1/users/ana?confirm=erase", None).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        assert_eq!(
            (receipt["n_memories"].as_i64(), receipt["n_segments"].as_i64()),
            (Some(1), Some(1))
        );
        let (_, memories) = api.get("/v1/users/ana/memories").await;
        assert_eq!(memories["memories"].as_array().map(Vec::len), Some(0), "{memories}");
        let (_, bo) = api.get("/v1/users/bo/memories").await;
        assert_eq!(bo["memories"].as_array().map(Vec::len), Some(1), "{bo}");
        let (status, _) = api.call("DELETE", "/v1/users/nobody?confirm=erase", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn an_admin_cancel_reaches_the_provider_and_the_canceled_requests_are_planned_again() {
    let test = TestApp::with_batch_sim(
        memsift_store::testing::TestDb::sqlite().await,
        memsift_sim::FaultConfig::default(),
    )
    .await;
    test.import(
        "c.jsonl",
        &crate::helpers::line("ana", "c1", 0, "user", "I live in Lisbon.", true),
    )
    .await
    .unwrap();
    // One step plans and submits; the simulator's clock has not moved, so the batch is running.
    memsift_engine::pipeline::run_once(&test.app).await.unwrap();
    let batch = test
        .app
        .store
        .batches()
        .list_batches(Some("submitted"), None)
        .await
        .unwrap()
        .remove(0);
    let batch_id = batch.id.clone();
    with_api(&test.app, |api| async move {
        let (status, body) = api
            .post(&format!("/v1/admin/batches/{batch_id}/cancel"), json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, _) = api
            .post(
                "/v1/admin/batches/0190c0de-0000-7000-8000-000000000000/cancel",
                json!({}),
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    })
    .await;
    assert_eq!(
        test.sim().counters().per_endpoint.get("anthropic.batches.cancel"),
        Some(&1)
    );
    // The protocol takes it from here: the canceled request gets a new attempt and is applied.
    let report = memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    assert_eq!(report.n_segments_extracted, 1, "{report:?}");
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let statuses: Vec<&str> = requests.iter().map(|row| row.status.as_str()).collect();
    assert!(
        statuses.contains(&"canceled") && statuses.contains(&"applied"),
        "{statuses:?}"
    );
    // An ingested batch cannot be canceled; the error says why.
    let ended = test
        .app
        .store
        .batches()
        .batch(batch.id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let error = test.app.coordinator.as_ref().unwrap().cancel(&ended).await.unwrap_err();
    assert!(error.contains("only a submitted batch"), "{error}");
    test.finish().await;
}
