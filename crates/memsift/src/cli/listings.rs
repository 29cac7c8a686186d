//! Listings: segments, memories, requests, batches, costs, and one item shown whole.

use anyhow::Context;
use memsift_engine::app::App;
use memsift_store::IdKind;

use super::ids::{matching_ids, unresolved};
use crate::render;

/// `memsift segments`.
pub(super) async fn segments(
    app: &App,
    user: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
    json: bool,
) -> anyhow::Result<()> {
    let rows = app
        .store
        .listing()
        .list_segments(user.as_deref(), status.as_deref(), limit)
        .await?;
    if json {
        return render::print_json(&rows);
    }
    println!("{}", render::segments_table(&rows));
    print_unhealthy_lanes(app).await
}

/// `memsift memories`: a listing is a read, like the API's: access counts feed scoring and
/// refinement.
pub(super) async fn memories(app: &App, user: &str, limit: Option<i64>, json: bool) -> anyhow::Result<()> {
    let rows = app.store.listing().list_memories(user, limit).await?;
    let ids: Vec<String> = rows.iter().map(|row| row.id.clone()).collect();
    app.store
        .listing()
        .record_memory_access(user, &ids, app.clock.now())
        .await?;
    if json {
        return render::print_json(&rows);
    }
    println!("{}", render::memories_table(&rows));
    Ok(())
}

/// `memsift batches`.
pub(super) async fn batches(app: &App, status: Option<String>, limit: Option<i64>, json: bool) -> anyhow::Result<()> {
    let rows = app.store.batches().list_batches(status.as_deref(), limit).await?;
    if json {
        return render::print_json(&rows);
    }
    println!("{}", render::batches_table(&rows));
    print_unhealthy_lanes(app).await
}

/// `memsift requests`.
pub(super) async fn requests(
    app: &App,
    user: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
    json: bool,
) -> anyhow::Result<()> {
    let rows = app
        .store
        .listing()
        .list_requests(user.as_deref(), status.as_deref(), limit)
        .await?;
    if json {
        return render::print_json(&rows);
    }
    println!("{}", render::requests_table(&rows));
    Ok(())
}

/// `memsift costs`.
pub(super) async fn costs(app: &App, json: bool) -> anyhow::Result<()> {
    let rows = app.store.listing().cost_by_user_stage().await?;
    if json {
        return render::print_json(&rows);
    }
    println!("{}", render::costs_table(&rows));
    Ok(())
}

/// `memsift show`: one request, batch or memory, whichever the id names.
pub(super) async fn show(app: &App, input: &str, json: bool) -> anyhow::Result<()> {
    let kinds = [IdKind::Request, IdKind::Batch, IdKind::Memory];
    let matches = matching_ids(app, &kinds, input, None).await?;
    let [(kind, id)] = matches.as_slice() else {
        return Err(unresolved(&kinds, input, None, &matches));
    };
    if *kind == IdKind::Batch {
        let batch_id = memsift_core::BatchId::parse(id)?;
        let batch = app
            .store
            .batches()
            .batch(batch_id)
            .await?
            .with_context(|| format!("show: batch {batch_id} is gone"))?;
        let requests = app.store.listing().list_batch_requests(batch_id).await?;
        if json {
            return render::print_json(&serde_json::json!({ "batch": batch, "requests": requests }));
        }
        println!("{}", render::batches_table(std::slice::from_ref(&batch)));
        println!("{}", render::requests_table(&requests));
        return Ok(());
    }
    if *kind == IdKind::Memory {
        let memory_id = memsift_core::MemoryId::parse(id)?;
        let memory = app
            .store
            .listing()
            .memory_detail(memory_id)
            .await?
            .with_context(|| format!("show: memory {memory_id} is gone"))?;
        if json {
            return render::print_json(&memory);
        }
        println!("{}", serde_json::to_string_pretty(&memory)?);
        return Ok(());
    }
    let request_id = memsift_core::RequestId::parse(id)?;
    let detail = app.store.listing().request_detail(request_id).await?;
    if json {
        return render::print_json(&detail);
    }
    println!("{}", serde_json::to_string_pretty(&detail)?);
    Ok(())
}

/// Under a listing: every provider lane that is paused or unwell, why, and the likely fix.
async fn print_unhealthy_lanes(app: &App) -> anyhow::Result<()> {
    for line in memsift_engine::health::describe_unhealthy(&app.store.lanes().lane_health().await?) {
        println!("{line}");
    }
    Ok(())
}
