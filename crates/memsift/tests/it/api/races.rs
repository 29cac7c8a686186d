//! Who a request is about, over HTTP: an erasure and a large ingest of the same user exclude each
//! other on both backends, and a user id names the same user however it is spelled on the way
//! in, on read and on erase.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::client::{message, with_api};
use crate::helpers::TestApp;

/// A word no other test writes, so finding it anywhere in the database means it survived.
const MARKER: &str = "Quokkaville";

#[tokio::test]
async fn an_erasure_racing_a_large_ingest_leaves_nothing_it_did_not_count() {
    // Before: on PostgreSQL, 40k messages imported 1.5 s before `erase` all survived under the
    // erased user and the receipt counted 1 message. Now ingest and erasure take the user's lock,
    // so whichever runs second sees all of the other's work or none of it.
    for test in [TestApp::postgres().await, TestApp::sqlite().await] {
        let store = test.app.store.clone();
        with_api(&test.app, |api| async move {
            for n_messages in [10_000_i64, 2_000, 500] {
                let (status, _) = api
                    .post(
                        "/v1/users/ana/messages",
                        json!([message("c0", 0, "user", "I live in Lisbon.", true)]),
                    )
                    .await;
                assert_eq!(status, StatusCode::OK);
                let batch: Vec<Value> = (0..n_messages)
                    .map(|n| message("c1", n + 1, "user", &format!("I moved to {MARKER} in year {n}."), false))
                    .collect();
                let ((posted, answer), (erased, receipt)) = tokio::join!(
                    api.post("/v1/users/ana/messages", Value::Array(batch)),
                    api.call("DELETE", "/v1/users/ana?confirm=erase", None)
                );
                assert_eq!(erased, StatusCode::OK, "{receipt}");
                let counted = receipt["n_messages"].as_i64().unwrap();
                let (again, second) = api.call("DELETE", "/v1/users/ana?confirm=erase", None).await;
                let label =
                    format!("{n_messages} messages: ingest {posted} {answer}, receipts {receipt} then {second}");
                // Erasing an erased user again answers an empty receipt.
                assert_eq!(again, StatusCode::OK, "{label}");
                let recounted = second["n_messages"].as_i64().unwrap();
                if counted == n_messages + 1 {
                    // The ingest went first: the erasure counted and removed all of it.
                    assert_eq!((posted, recounted), (StatusCode::OK, 0), "{label}");
                } else {
                    // The erasure went first: the ingest stored a new user, whole, or nothing.
                    assert_eq!(counted, 1, "{label}");
                    let stored = if posted == StatusCode::OK { n_messages } else { 0 };
                    assert_eq!(recounted, stored, "{label}");
                }
                let found = store.find_text_anywhere(MARKER).await.unwrap();
                assert!(found.is_empty(), "{label}: the erased text is still in {found:?}");
                assert_eq!(store.count_rows("messages").await.unwrap(), 0, "{label}");
            }
        })
        .await;
        test.finish().await;
    }
}

#[tokio::test]
async fn a_user_id_names_one_user_however_it_is_spelled_and_an_unstorable_one_is_refused() {
    // Before: `POST /v1/users/zz%20/messages` stored under `zz`, and `DELETE /v1/users/zz%20`
    // answered 404 with the data kept; an id with U+0000 was stored with U+FFFD in its place.
    for test in [TestApp::postgres().await, TestApp::sqlite().await] {
        let store = test.app.store.clone();
        with_api(&test.app, |api| async move {
            let two = json!([
                message("c1", 0, "user", "I live in Lisbon.", false),
                message("c1", 1, "user", "I have a dog named Rex.", true)
            ]);
            let (status, answer) = api.post("/v1/users/zz%20/messages", two.clone()).await;
            assert_eq!(status, StatusCode::OK, "{answer}");
            // A decomposed é (e + U+0301) and the composed one are one user.
            let (status, answer) = api.post("/v1/users/e%CC%81/messages", two).await;
            assert_eq!(status, StatusCode::OK, "{answer}");
            for (extract, read) in [("zz%20", "%20zz"), ("e%CC%81", "%C3%A9")] {
                let (status, extracted) = api.post(&format!("/v1/users/{extract}/extract"), json!(null)).await;
                assert_eq!(status, StatusCode::OK, "{extract}: {extracted}");
                for spelled in [extract, read] {
                    let (status, listed) = api.get(&format!("/v1/users/{spelled}/memories")).await;
                    assert_eq!(status, StatusCode::OK, "{spelled}: {listed}");
                    assert_eq!(
                        listed["memories"].as_array().map(Vec::len),
                        Some(2),
                        "{spelled}: {listed}"
                    );
                }
            }
            for refused in ["a%00b", "a%EF%BF%BDb", "erased%3Aab"] {
                let (status, error) = api
                    .post(
                        &format!("/v1/users/{refused}/messages"),
                        json!([message("c1", 0, "user", "I like tea.", true)]),
                    )
                    .await;
                assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}: {error}");
                assert!(error["error"].as_str().unwrap().contains("user"), "{refused}: {error}");
            }
            assert_eq!(
                store.count_rows("messages").await.unwrap(),
                4,
                "nothing of the refused ids"
            );
            let (status, receipt) = api.call("DELETE", "/v1/users/zz%20?confirm=erase", None).await;
            assert_eq!(
                (status, receipt["n_messages"].as_i64()),
                (StatusCode::OK, Some(2)),
                "{receipt}"
            );
            let (status, receipt) = api.call("DELETE", "/v1/users/%C3%A9?confirm=erase", None).await;
            assert_eq!(
                (status, receipt["n_messages"].as_i64()),
                (StatusCode::OK, Some(2)),
                "{receipt}"
            );
            assert_eq!(store.count_rows("messages").await.unwrap(), 0);
        })
        .await;
        test.finish().await;
    }
}
