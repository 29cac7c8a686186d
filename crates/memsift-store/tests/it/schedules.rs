//! Schedule claims (invariant 11): who runs a periodic job's tick, on both backends.

use chrono::Duration;
use memsift_store::Store;

use crate::helpers::t0;

fn lease() -> Duration {
    Duration::minutes(15)
}

pub async fn two_owners_racing_for_one_tick_give_exactly_one_run(store: &Store) {
    let tick = t0();
    // Several rounds, so the race is not won by whoever happens to be first once.
    for round in 0..5 {
        let name = format!("job-{round}");
        let (a, b, c) = tokio::join!(
            store.schedules().claim_schedule(&name, "daemon-a", tick, tick, lease()),
            store.schedules().claim_schedule(&name, "daemon-b", tick, tick, lease()),
            store.schedules().claim_schedule(&name, "daemon-c", tick, tick, lease()),
        );
        let n_won = [a.unwrap(), b.unwrap(), c.unwrap()]
            .into_iter()
            .filter(|won| *won)
            .count();
        assert_eq!(n_won, 1, "round {round}: exactly one owner runs the tick");
    }
}

pub async fn a_live_lease_blocks_the_next_tick_until_it_is_finished(store: &Store) {
    let first = t0();
    let second = first + Duration::seconds(30);
    assert!(
        store
            .schedules()
            .claim_schedule("run_pipeline", "daemon-a", first, first, lease())
            .await
            .unwrap()
    );
    // daemon-a's run is slow: the next tick comes while its lease is live.
    assert!(
        !store
            .schedules()
            .claim_schedule("run_pipeline", "daemon-b", second, second, lease())
            .await
            .unwrap(),
        "a run still in flight must not be overlapped by the next tick"
    );
    // The tick was not consumed by the failed claim: once the slow run finishes, it can run.
    assert!(
        store
            .schedules()
            .finish_schedule("run_pipeline", "daemon-a")
            .await
            .unwrap()
    );
    assert!(
        store
            .schedules()
            .claim_schedule("run_pipeline", "daemon-b", second, second, lease())
            .await
            .unwrap()
    );
    // Finishing is owner-scoped: daemon-a cannot release daemon-b's lease.
    assert!(
        !store
            .schedules()
            .finish_schedule("run_pipeline", "daemon-a")
            .await
            .unwrap()
    );
    let rows = store.schedule_rows().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].lease_owner.as_deref(), Some("daemon-b"));
    assert_eq!(rows[0].last_fired_at, Some(second));
    assert_eq!(rows[0].lease_until, Some(second + lease()));
}

pub async fn an_expired_lease_lets_another_owner_take_over(store: &Store) {
    let first = t0();
    assert!(
        store
            .schedules()
            .claim_schedule("sweep", "daemon-a", first, first, lease())
            .await
            .unwrap()
    );
    // daemon-a died mid-run and never finished. One second before its lease ends, it still blocks…
    let next = first + Duration::minutes(5);
    let before_expiry = first + lease() - Duration::seconds(1);
    assert!(
        !store
            .schedules()
            .claim_schedule("sweep", "daemon-b", next, before_expiry, lease())
            .await
            .unwrap()
    );
    // …and from the moment it ends, another owner takes the job over.
    let at_expiry = first + lease();
    assert!(
        store
            .schedules()
            .claim_schedule("sweep", "daemon-b", next, at_expiry, lease())
            .await
            .unwrap()
    );
    let rows = store.schedule_rows().await.unwrap();
    assert_eq!(rows[0].lease_owner.as_deref(), Some("daemon-b"));
    assert_eq!(rows[0].lease_until, Some(at_expiry + lease()));
}

pub async fn a_tick_already_run_is_not_run_again(store: &Store) {
    let tick = t0();
    assert!(
        store
            .schedules()
            .claim_schedule("close_idle_segments", "daemon-a", tick, tick, lease())
            .await
            .unwrap()
    );
    assert!(
        store
            .schedules()
            .finish_schedule("close_idle_segments", "daemon-a")
            .await
            .unwrap()
    );
    let later = tick + Duration::seconds(10);
    for owner in ["daemon-a", "daemon-b"] {
        assert!(
            !store
                .schedules()
                .claim_schedule("close_idle_segments", owner, tick, later, lease())
                .await
                .unwrap(),
            "{owner} ran a tick that had already run"
        );
    }
    // An older tick arriving late (a trigger delayed behind a slow run) is not run either.
    let older = tick - Duration::minutes(5);
    assert!(
        !store
            .schedules()
            .claim_schedule("close_idle_segments", "daemon-b", older, later, lease())
            .await
            .unwrap()
    );
    // The next tick is.
    let next = tick + Duration::minutes(5);
    assert!(
        store
            .schedules()
            .claim_schedule("close_idle_segments", "daemon-b", next, next, lease())
            .await
            .unwrap()
    );
    let rows = store.schedule_rows().await.unwrap();
    assert_eq!(rows[0].name, "close_idle_segments");
    assert_eq!(rows[0].last_fired_at, Some(next));
}
