//! Entity GC's write: merge an entity into another, delete it, or keep it.

use chrono::{DateTime, Utc};
use memsift_core::{RequestId, UserId};
use serde_json::json;

use super::{EntityDecision, StageApplied, StageOutcome};
use crate::Result;
use crate::handles::Stages;
use crate::journal::{Capture, JoinRow, JournalEntry, RowsAfter};
use crate::tx::sql;

impl Stages<'_> {
    /// Applies entity GC's decision for `entity_id`: a merge moves every join to the target
    /// (validated: the user's, same kind, active, one of the candidates offered) and archives the
    /// entity; a delete removes its joins and archives it; keep changes nothing. Journaled with
    /// the exact prior joins and entity rows.
    pub async fn apply_entity_decision(
        self,
        request_id: RequestId,
        user_id: UserId,
        entity_id: &str,
        decision: &EntityDecision,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        self.write(async |tx| {
            type Entity = (String, String, Option<DateTime<Utc>>);
            let source: Option<Entity> = tx
                .fetch_optional(sql!(
                    "SELECT id, kind, archived_at FROM entities WHERE id = $1 AND user_id = $2",
                    entity_id,
                    user_id
                ))
                .await?;
            let mut problem = match (&source, decision) {
                (_, EntityDecision::Keep) => Some("keep".to_owned()),
                (None, _) => Some(format!("entity {entity_id} is gone")),
                (Some((_, _, Some(_))), _) => Some(format!("entity {entity_id} is archived")),
                _ => None,
            };
            if let (None, Some((_, kind, _)), EntityDecision::Merge { target, candidates }) =
                (&problem, &source, decision)
            {
                let target_row: Option<Entity> = tx
                    .fetch_optional(sql!(
                        "SELECT id, kind, archived_at FROM entities WHERE id = $1 AND user_id = $2",
                        target,
                        user_id
                    ))
                    .await?;
                problem = match target_row {
                    _ if !candidates.contains(target) => Some(format!("merge target {target} was not a candidate")),
                    _ if target == entity_id => Some("merge target is the entity itself".to_owned()),
                    None => Some(format!("merge target {target} is not this user's entity")),
                    Some((_, _, Some(_))) => Some(format!("merge target {target} is archived")),
                    Some((_, target_kind, None)) if target_kind != *kind => {
                        Some(format!("merge target {target} is a `{target_kind}`, not a `{kind}`"))
                    }
                    Some(_) => None,
                };
            }
            if let Some(problem) = problem {
                return tx.settle_without_change(request_id, 0, Some(&problem), now).await;
            }
            if !tx.claim_answer(request_id, 1, None, now).await? {
                tx.unclaimed(request_id).await?;
                return Ok(StageOutcome::AlreadyApplied);
            }
            let mut entities = vec![entity_id.to_owned()];
            if let EntityDecision::Merge { target, .. } = decision {
                entities.push(target.clone());
            }
            let before = tx
                .capture_rows(Capture {
                    joins_of_entities: &entities,
                    ..Capture::default()
                })
                .await?;
            let mut created_joins: Vec<JoinRow> = Vec::new();
            let kind = match decision {
                EntityDecision::Merge { target, .. } => {
                    // The joins the target gains, so an undo removes exactly these and leaves any
                    // join a later extraction gave the target.
                    created_joins = tx
                        .fetch_all(sql!(
                            "SELECT memory_id, $2 AS entity_id FROM memory_entities
                             WHERE entity_id = $1
                               AND memory_id NOT IN (SELECT memory_id FROM memory_entities WHERE entity_id = $2)",
                            entity_id,
                            target
                        ))
                        .await?;
                    tx.execute(sql!(
                        "INSERT INTO memory_entities (memory_id, entity_id)
                         SELECT memory_id, $2 FROM memory_entities WHERE entity_id = $1 ON CONFLICT DO NOTHING",
                        entity_id,
                        target
                    ))
                    .await?;
                    tx.execute(sql!(
                        "UPDATE entities SET link_count = (SELECT COUNT(*) FROM memory_entities WHERE entity_id = $1),
                                last_linked_at = $2
                         WHERE id = $1",
                        target,
                        now
                    ))
                    .await?;
                    "entity_merge"
                }
                _ => "entity_delete",
            };
            tx.execute(sql!("DELETE FROM memory_entities WHERE entity_id = $1", entity_id))
                .await?;
            tx.execute(sql!(
                "UPDATE entities SET archived_at = $2, link_count = 0 WHERE id = $1",
                entity_id,
                now
            ))
            .await?;
            let after = RowsAfter {
                detail: json!({ "entity_id": entity_id, "decision": kind, "target": match decision {
                    EntityDecision::Merge { target, .. } => Some(target.clone()),
                    _ => None,
                } }),
                created_joins,
                ..RowsAfter::default()
            };
            let entry = JournalEntry {
                kind,
                user_id,
                request_id: Some(request_id),
                reason: "entity GC",
                now,
            };
            let operation_id = tx.journal(entry, &before, &after).await?;
            Ok(StageOutcome::Applied(StageApplied {
                n_entities_changed: 1,
                operation_id: Some(operation_id),
                ..StageApplied::default()
            }))
        })
        .await
    }
}
