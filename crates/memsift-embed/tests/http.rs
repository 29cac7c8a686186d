//! The HTTP embedder against the simulator over real HTTP on 127.0.0.1 (no mocks).

use std::sync::Arc;

use memsift_embed::{EmbedError, Embedder, HttpEmbedder, cosine};
use memsift_llm::ClientOptions;
use memsift_sim::{ScriptedResponder, Sim, SimConfig};
use secrecy::SecretString;

async fn sim() -> memsift_sim::SimHandle {
    let responder = ScriptedResponder::from_fn(|_| memsift_sim::ResponderReply::Text("[]".to_owned()));
    Sim::start(SimConfig::new(Arc::new(responder))).await.unwrap()
}

fn options(base_url: &str, model: &str) -> ClientOptions {
    ClientOptions::new(
        Some(format!("{base_url}/v1")),
        Some(SecretString::from("sk-test")),
        model,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_come_back_normalized_in_order_and_tagged_with_the_model() {
    let sim = sim().await;
    let embedder = Arc::new(
        HttpEmbedder::new(
            options(&sim.base_url, "text-embedding-3-small"),
            384,
            false,
            tokio::runtime::Handle::current(),
        )
        .unwrap(),
    );
    assert_eq!(embedder.model_id(), "openai-compatible:text-embedding-3-small");
    assert_eq!(embedder.dimension(), 384);

    let texts = [
        "I adopted a dog named Rex",
        "The user adopted a dog called Rex",
        "Quarterly taxes are due",
    ];
    let blocking = Arc::clone(&embedder);
    // The blocking trait method runs where callers run every embedder: on the blocking pool.
    let vectors = tokio::task::spawn_blocking(move || blocking.embed(&texts))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(vectors.len(), 3);
    for vector in &vectors {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
    // Order is the input order: each text's vector equals the one it gets alone.
    let alone = embedder.embed_async(&[texts[2]]).await.unwrap();
    assert!((cosine(&alone[0], &vectors[2]) - 1.0).abs() < 1e-5);
    assert!(cosine(&vectors[0], &vectors[1]) > cosine(&vectors[0], &vectors[2]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_another_dimension_is_an_error_not_a_silent_mix() {
    let sim = sim().await;
    // The sim answers 384-d by default; configured for 256 without asking the server to shorten.
    let embedder = HttpEmbedder::new(
        options(&sim.base_url, "m"),
        256,
        false,
        tokio::runtime::Handle::current(),
    )
    .unwrap();
    let error = embedder.embed_async(&["hello"]).await.unwrap_err();
    assert!(matches!(error, EmbedError::BadOutput { .. }), "{error}");
    assert!(error.to_string().contains("384"), "{error}");

    // Asking for the shorter size is how a shortening-capable model is configured.
    let shortened = HttpEmbedder::new(
        options(&sim.base_url, "m"),
        256,
        true,
        tokio::runtime::Handle::current(),
    )
    .unwrap();
    assert_eq!(shortened.embed_async(&["hello"]).await.unwrap()[0].len(), 256);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_texts_are_refused_before_any_request() {
    let sim = sim().await;
    let embedder = HttpEmbedder::new(
        options(&sim.base_url, "m"),
        384,
        false,
        tokio::runtime::Handle::current(),
    )
    .unwrap();
    let error = embedder.embed_async(&["fine", ""]).await.unwrap_err();
    assert!(matches!(error, EmbedError::EmptyText { index: 1 }), "{error}");
}
