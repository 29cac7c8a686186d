//! Several daemons running the pipeline side by side on one PostgreSQL: each runs `run_pipeline`
//! on its own ticks and keeps stepping while its steps move work, and the work items' claims
//! keep them from doing any of it twice.

use std::sync::Arc;

use memsift::daemon::{Daemon, JobName, JobRun, PipelineRunner};

use crate::helpers::{TestApp, line, t0};

#[tokio::test]
async fn two_daemons_on_postgres_share_one_tick_of_the_pipeline_and_drain_a_backlog_past_one_claim_batch() {
    let test = TestApp::postgres().await;
    let a = Daemon::new(test.app.clone(), Arc::new(PipelineRunner)).unwrap();
    let b = Daemon::new(test.second_daemon("daemon-b"), Arc::new(PipelineRunner)).unwrap();
    // More closed segments than one step claims (32), one user each.
    let n_users = 90;
    let chat: String = (0..n_users)
        .map(|user_idx| {
            line(
                &format!("user-{user_idx:03}"),
                "c1",
                0,
                "user",
                &format!("I live in Lisbon and my dog is called Rex{user_idx}."),
                true,
            )
        })
        .collect();
    test.import("chat.jsonl", &chat).await.unwrap();
    let (runs_a, runs_b) = tokio::join!(a.tick(t0()), b.tick(t0()));
    for runs in [runs_a.unwrap(), runs_b.unwrap()] {
        let pipeline: Vec<&JobRun> = runs.iter().filter(|run| run.job == JobName::RunPipeline).collect();
        assert_eq!(pipeline.len(), 1, "each daemon runs its own pipeline tick: {runs:?}");
        assert_eq!(pipeline[0].error, None);
    }
    // One tick of the two daemons extracted the whole backlog: each kept stepping while its
    // steps moved work, and no segment was extracted twice.
    let segments = test.app.store.listing().list_segments(None, None, None).await.unwrap();
    assert_eq!(segments.len(), n_users);
    assert!(
        segments.iter().all(|segment| segment.status == "extracted"),
        "{segments:?}"
    );
    let applied = test
        .app
        .store
        .listing()
        .list_requests(None, Some("applied"), None)
        .await
        .unwrap();
    let mut chunks: Vec<_> = applied
        .iter()
        .filter(|request| request.purpose == "extraction")
        .map(|request| (request.segment_id.clone(), request.chunk_index))
        .collect();
    assert_eq!(chunks.len(), n_users, "one applied extraction per segment");
    chunks.sort();
    chunks.dedup();
    assert_eq!(chunks.len(), n_users, "a chunk was applied twice");
    // Each daemon counts the segments it claimed (`/metrics`); together, every segment once.
    let claims = [a.app().claims.snapshot(), b.app().claims.snapshot()];
    assert_eq!(
        claims[0].n_segments + claims[1].n_segments,
        n_users as u64,
        "{claims:?}"
    );
    assert!(
        claims
            .iter()
            .all(|claim| claim.n_claims > 0 && claim.at_most[11] == claim.n_claims)
    );
    for user_idx in 0..n_users {
        let memories = test
            .app
            .store
            .listing()
            .list_memories(&format!("user-{user_idx:03}"), None)
            .await
            .unwrap();
        let mut texts: Vec<&str> = memories.iter().map(|memory| memory.text.as_str()).collect();
        let n_memories = texts.len();
        texts.sort();
        texts.dedup();
        assert!(
            n_memories > 0 && texts.len() == n_memories,
            "user-{user_idx:03}: {texts:?}"
        );
    }
    test.finish().await;
}
