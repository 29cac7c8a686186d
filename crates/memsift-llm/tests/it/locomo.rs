//! The `locomo:PATH` responder over HTTP, on a small file in the LoCoMo benchmark's shape written
//! for this project (`fixtures/locomo-format.json`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use futures_util::StreamExt;
use memsift_core::contract::{ExtractedItem, Turn};
use memsift_core::status::Role;
use memsift_core::transcript::render_turns;
use memsift_llm::anthropic::{BatchRequest, BatchResult, InputMessage};
use memsift_sim::{Sim, SimConfig};

use crate::support::{KEY, harness, params};

fn locomo_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/locomo-format.json")
}

#[tokio::test]
async fn locomo_answers_a_session_with_its_observations_citing_its_turns() {
    let path = locomo_path();
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let sample = &data[0];
    let session = sample["conversation"]["session_1"].as_array().unwrap();
    let at = crate::support::start_time();
    let turns: Vec<Turn> = session
        .iter()
        .map(|turn| Turn {
            label: turn["dia_id"].as_str().unwrap().to_owned(),
            role: Role::User,
            speaker: turn["speaker"].as_str().map(str::to_owned),
            content: turn["text"].as_str().unwrap().to_owned(),
            at,
        })
        .collect();
    let labels: BTreeSet<String> = turns.iter().map(|turn| turn.label.clone()).collect();
    let first_observation = sample["observation"]["session_1_observation"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()[0][0]
        .as_str()
        .unwrap()
        .to_owned();

    let config = SimConfig::from_cli(&format!("locomo:{}", path.display()), None)
        .unwrap()
        .with_api_key(KEY);
    let sim = Sim::start(config).await.unwrap();
    let h = harness(Default::default(), "[]").await;
    let client = memsift_llm::AnthropicClient::new(h.options(sim.base_url.clone(), "claude-haiku-4-5")).unwrap();
    let mut request = params(8192);
    request.messages = vec![InputMessage::user(render_turns(&turns))];
    let batch = client
        .create_batch(&[BatchRequest {
            custom_id: "conv-session-1".into(),
            params: request,
        }])
        .await
        .created()
        .unwrap();
    let ended = client.retrieve_batch(&batch.id).await.unwrap();
    let mut results = client.batch_results(&ended).await.unwrap();
    let line = results.next().await.unwrap().unwrap();
    let BatchResult::Succeeded { message } = line.result else {
        panic!("succeeded")
    };
    let items: Vec<ExtractedItem> = serde_json::from_str(&message.text()).unwrap();
    assert!(!items.is_empty());
    assert!(items.iter().any(|item| item.text == first_observation));
    for item in &items {
        assert!(!item.evidence_turns.is_empty());
        assert!(
            item.evidence_turns.iter().all(|label| labels.contains(label)),
            "{item:?}"
        );
    }
}

#[tokio::test]
async fn the_counters_endpoint_serves_the_same_oracle_as_the_handle() {
    let h = harness(Default::default(), "[]").await;
    h.anthropic().create_message(&params(16)).await.unwrap();
    let url = format!("{}/_sim/counters", h.sim.base_url);
    let served: memsift_sim::Counters = reqwest::get(&url).await.unwrap().json().await.unwrap();
    assert_eq!(served, h.sim.counters());
    assert_eq!(served.per_endpoint["messages"], 1);

    // Shutdown completes even while a client still holds a keep-alive connection.
    let client = h.anthropic();
    client.create_message(&params(16)).await.unwrap();
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), h.sim.shutdown()).await;
    stopped.expect("shutdown finishes").unwrap();
    assert!(
        client.create_message(&params(16)).await.is_err(),
        "nothing listens any more"
    );
}
