//! What is refused on the way in, as a whole and with nothing stored: a body over the limit, a
//! message over the size limit, a message with a bad field.

use reqwest::StatusCode;
use serde_json::json;

use super::client::{ana_messages, message, with_api};
use crate::helpers::TestApp;

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let test = TestApp::sqlite().await;
    let mut app = test.app.clone();
    app.config.api.max_body_bytes = 2048;
    let store = app.store.clone();
    with_api(&app, |api| async move {
        let big = "x".repeat(4096);
        let (status, error) = api
            .post("/v1/users/ana/messages", json!([message("c1", 0, "user", &big, false)]))
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{error}");
        assert!(error["error"].as_str().unwrap().contains("max_body_bytes"), "{error}");
        // Under the limit the same route works.
        let (status, _) = api
            .post(
                "/v1/users/ana/messages",
                json!([message("c1", 0, "user", "small", false)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(store.count_rows("messages").await.unwrap(), 1);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn a_bad_message_is_refused_with_400_naming_the_field_and_nothing_is_stored() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    with_api(&test.app, |api| async move {
        let mut messages = ana_messages();
        messages[1]["timestamp"] = json!("yesterday");
        let (status, error) = api.post("/v1/users/ana/messages", messages).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            error["error"],
            json!(
                "message #2: field `timestamp`: `yesterday` is not a time; use RFC 3339 such as 2026-03-01T10:00:00Z"
            )
        );
        let mut messages = ana_messages();
        messages[0]["user"] = json!("bo");
        let (status, error) = api.post("/v1/users/ana/messages", messages).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            error["error"].as_str().unwrap().starts_with("message #1: field `user`"),
            "{error}"
        );
        let (status, error) = api
            .post(
                "/v1/users/ana/messages",
                json!([{"conversation": "c1", "role": "user"}]),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            error["error"].as_str().unwrap().contains("missing field `content`"),
            "{error}"
        );
        let (status, error) = api.post("/v1/users/ana/segments/not-an-id/close", json!(null)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(error["error"].as_str().unwrap().contains("`segment_id`"), "{error}");
        assert_eq!(store.count_rows("messages").await.unwrap(), 0);
    })
    .await;
    test.finish().await;
}

#[tokio::test]
async fn a_message_over_the_size_limit_is_refused_with_413_naming_it_and_nothing_is_stored() {
    let test = TestApp::sqlite().await;
    let store = test.app.store.clone();
    let limit = test.app.config.ingest.max_message_len();
    // Two-byte characters: exactly at the limit, and one byte over it.
    let at_limit = "é".repeat(limit / 2);
    let over_limit = format!("{at_limit}a");
    with_api(&test.app, |api| async move {
        let (status, error) = api
            .post(
                "/v1/users/ana/messages",
                json!([
                    message("c1", 0, "user", "I live in Lisbon.", false),
                    message("c1", 1, "user", &over_limit, false),
                ]),
            )
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{error}");
        assert_eq!(
            error["error"],
            json!(format!(
                "message #2: field `content` is {} bytes, over the limit of {limit} bytes ([ingest] max_message_bytes); split the message",
                limit + 1
            ))
        );
        assert_eq!(store.count_rows("messages").await.unwrap(), 0);
        let (status, report) = api
            .post(
                "/v1/users/ana/messages",
                json!([message("c1", 0, "user", &at_limit, false)]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{report}");
        assert_eq!(store.count_rows("messages").await.unwrap(), 1);
    })
    .await;
    test.finish().await;
}
