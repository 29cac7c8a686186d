//! Changes an operator makes by hand: a memory confirmed, superseded or expired, a journaled
//! operation undone, a provider batch canceled.

use anyhow::Context;
use memsift_engine::app::App;
use memsift_store::IdKind;

use super::args::MemoryAction;
use super::ids::resolve_id;
use crate::render;

/// `memsift memory confirm|supersede|expire`, journaled and undoable.
pub(super) async fn memory(app: &App, action: MemoryAction, json: bool) -> anyhow::Result<()> {
    let (args, revision) = match action {
        MemoryAction::Confirm(args) => (args, memsift_store::Revision::Confirm),
        MemoryAction::Supersede { revision, content } => (revision, memsift_store::Revision::Supersede { content }),
        MemoryAction::Expire(args) => (args, memsift_store::Revision::Expire),
    };
    let memory_id =
        memsift_core::MemoryId::parse(&resolve_id(app, IdKind::Memory, &args.memory, Some(&args.user)).await?)?;
    let revised = app
        .store
        .memories()
        .revise_memory(&args.user, memory_id, &revision, &args.reason, app.clock.now())
        .await?;
    if json {
        render::print_json(&revised)?;
    } else {
        println!(
            "memory {memory_id}: {}{}; undo with `memsift undo --user {} {}`",
            match &revision {
                memsift_store::Revision::Confirm => "confirmed",
                memsift_store::Revision::Supersede { .. } => "superseded",
                memsift_store::Revision::Expire => "expired",
            },
            revised
                .new_memory_id
                .map(|id| format!(" by new memory {id}"))
                .unwrap_or_default(),
            args.user,
            revised.operation_id
        );
    }
    Ok(())
}

/// `memsift undo`: the exact prior rows written back.
pub(super) async fn undo(app: &App, user: &str, operation: &str, json: bool) -> anyhow::Result<()> {
    let operation_id =
        memsift_core::OperationId::parse(&resolve_id(app, IdKind::Operation, operation, Some(user)).await?)?;
    let undone = app
        .store
        .memories()
        .undo_operation(user, operation_id, app.clock.now())
        .await?;
    if json {
        render::print_json(&undone)?;
    } else {
        let deleted = if undone.deleted_memory_ids.is_empty() {
            String::new()
        } else {
            format!(
                "; deleted what it had created: {}",
                undone.deleted_memory_ids.join(", ")
            )
        };
        println!(
            "undo: operation {} ({}) reversed; restored {} memor{} ({}), {} link(s), {} entity join(s){deleted}",
            undone.operation_id,
            undone.kind,
            undone.restored_memory_ids.len(),
            if undone.restored_memory_ids.len() == 1 {
                "y"
            } else {
                "ies"
            },
            undone.restored_memory_ids.join(", "),
            undone.n_links_restored,
            undone.n_joins_restored,
        );
    }
    Ok(())
}

/// `memsift cancel`: the provider asked to cancel; the next poll ingests what finished.
pub(super) async fn cancel(app: &App, batch: &str) -> anyhow::Result<()> {
    let batch_id = memsift_core::BatchId::parse(&resolve_id(app, IdKind::Batch, batch, None).await?)?;
    let row = app
        .store
        .batches()
        .batch(batch_id)
        .await?
        .with_context(|| format!("cancel: no batch {batch_id}; `memsift batches` lists them"))?;
    let coordinator = app
        .coordinator
        .as_ref()
        .context("cancel: no batch lane is configured (an [llm.*] section with a batch provider)")?;
    coordinator
        .cancel(&row)
        .await
        .map_err(|error| anyhow::anyhow!("cancel: {error}"))?;
    println!("cancel: requested for batch {batch_id}; `memsift run` ingests what finished and re-plans the rest");
    Ok(())
}
