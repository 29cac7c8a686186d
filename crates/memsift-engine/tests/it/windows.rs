//! No request passes its model's context window: a message larger than a chunk goes in parts,
//! through a simulator that refuses what the provider refuses, and its segment is extracted.

use memsift_engine::pipeline::run_until_idle;
use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, line};

/// `bytes` of one word with no whitespace, from a fixed generator: letters and digits in no
/// pattern BPE can merge far, about two bytes a token, like a pasted key or blob.
fn one_word(bytes: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(ALPHABET[(state % ALPHABET.len() as u64) as usize])
        })
        .collect()
}

/// One message of one 700 KiB word (about 359,000 tokens, over any model's window the price table
/// knows) is imported and run through the batch lane of a simulator provider.
async fn a_700_kib_word_is_extracted_in_requests_within_the_window(test: TestApp, window: i64) {
    let word = one_word(700 * 1024);
    test.import("big.jsonl", &line("ana", "c1", 0, "user", &word, true))
        .await
        .unwrap();
    let total = run_until_idle(&test.app).await.unwrap();
    assert_eq!(total.n_segments_extracted, 1);
    let segment = &test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()[0];
    assert_eq!(segment.status, "extracted", "{segment:?}");
    let note = segment.plan_note.as_deref().expect("the split is noted on the segment");
    assert!(
        note.starts_with("turn t0 (") && note.contains(" parts over ") && note.ends_with("(batch.chunk_budget_tokens)"),
        "{note}"
    );
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    assert!(requests.len() > 50, "{} requests", requests.len());
    let max_tokens = i64::from(test.app.config.llm["extraction_standard"].max_tokens);
    let budget = i64::from(test.app.config.batch.chunk_budget_tokens);
    for request in &requests {
        assert_eq!(request.status, "applied");
        // The simulator bills the chunk's text plus the newline after the message.
        assert!(request.input_tokens <= budget + 2, "{request:?}");
        assert!(request.input_tokens + max_tokens <= window, "{request:?}");
    }
    // Every part of the word is sent (cache reads are billed apart, so input tokens are a floor).
    let sent: i64 = requests
        .iter()
        .map(|request| request.input_tokens + request.cache_read_tokens + request.cache_creation_tokens)
        .sum();
    let whole = memsift_tokens::count_tokens(&word) as i64;
    assert!(
        whole > 300_000 && sent > whole,
        "the word is {whole} tokens; {sent} were sent in all"
    );
    assert!(test.sim().counters().refused.is_empty(), "{:?}", test.sim().counters());
    test.finish().await;
}

#[tokio::test]
async fn a_700_kib_word_is_extracted_within_claude_haiku_45s_window_on_sqlite() {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    a_700_kib_word_is_extracted_in_requests_within_the_window(test, 200_000).await;
}

#[tokio::test]
async fn a_700_kib_word_is_extracted_within_gpt_4o_minis_window_on_postgres() {
    let test = TestApp::with_openai_batch_sim(TestDb::postgres().await).await;
    a_700_kib_word_is_extracted_in_requests_within_the_window(test, 128_000).await;
}
