//! The read side's queries: the texts its in-memory lexicons are built and brought forward from,
//! the entities and times a query names, and each result's card (text, evidence turns, entities,
//! links). Every query here is scoped by user in its SQL.
//!
//! There is no full-text index in the database: BM25 over a user's memories and turns is ranked
//! in memory, with that user's own statistics (see the engine's lexicon), and migration 0026
//! dropped the FTS5 tables and `tsvector` columns that nothing read.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, MessageId, SegmentId, UserId};

use crate::handles::Search;
use crate::turn_vectors::StampState;
use crate::tx::{Arg, Statement};
use crate::{BackendKind, Result, parse_id};

/// A memory row as a lexicon reads it: id, text, and 1 when active (0 when retired).
type StampedText = (String, String, i64);

/// Memory texts for a lexicon, as [`Search::memory_texts_since`] reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryTexts {
    /// Active memories written or changed: (id, text, what its evidence turns said, joined).
    pub changed: Vec<(MemoryId, String, String)>,
    /// Memories that stopped being active (archived, superseded).
    pub gone: Vec<MemoryId>,
    /// The turns each changed memory cites: (memory, message), in the order they were said.
    pub evidence: Vec<(MemoryId, MessageId)>,
}

/// What a search reads first, in one statement: whose store it is and where both of its stamps
/// stand, so every index the search uses is checked against the same moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSnapshot {
    /// The user.
    pub user_id: UserId,
    /// Their memory version and floor.
    pub memories: StampState,
    /// Their turn version and floor.
    pub turns: StampState,
}

/// A memory as a search result shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryCard {
    /// The memory.
    pub id: MemoryId,
    /// Its text.
    pub text: String,
    /// Importance (0–1).
    pub importance: f64,
    /// When it happens, if it says.
    pub happens_at: Option<DateTime<Utc>>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// The turns it rests on, in the order they were said.
    pub evidence: Vec<TurnCard>,
    /// The entities it names.
    pub entities: Vec<String>,
}

/// A stored turn as evidence or as a result.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnCard {
    /// The message.
    pub id: MessageId,
    /// The source's message id, else `t<seq>`.
    pub label: String,
    /// `user`, `assistant`, …
    pub role: String,
    /// The speaker's name, when given.
    pub speaker: Option<String>,
    /// When it was said.
    pub at: DateTime<Utc>,
    /// What was said.
    pub text: String,
}

/// A stored turn's words, for the in-memory lexical index over turns.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnText {
    /// The message.
    pub id: MessageId,
    /// Its segment (conversation stretch): a turn's neighbours are read within it.
    pub segment_id: SegmentId,
    /// The speaker's name, when given.
    pub speaker: Option<String>,
    /// What was said.
    pub text: String,
}

/// ` IN <the ids bound as one JSON array at parameter $at>`, to follow a column. One statement text
/// for any number of ids: an `IN ($2, …, $101)` list was a new prepared statement for every length.
/// On PostgreSQL the set is an array built once (`= ANY(ARRAY(…))`), which an index scan takes as
/// its key; `IN (SELECT …)` was planned as a join over the whole table (90 ms at 10k memories).
pub(crate) fn in_set(kind: BackendKind, at: usize) -> String {
    match kind {
        BackendKind::Sqlite => format!(" IN (SELECT value FROM json_each(${at}))"),
        BackendKind::Postgres => format!(" = ANY(ARRAY(SELECT jsonb_array_elements_text(${at})))"),
    }
}

/// The ids for an [`in_set`] parameter.
pub(crate) fn ids_arg<T: ToString>(ids: impl IntoIterator<Item = T>) -> Arg {
    let ids: Vec<String> = ids.into_iter().map(|id| id.to_string()).collect();
    Arg::json(&ids)
}

/// `column` as a filter that the query planner must not pick an index for. Card and link queries
/// name a hundred ids at most and check the user as well; without statistics (a fresh or freshly
/// filled table) both planners preferred the user's index and read all their rows (10k memories,
/// every message) to find those ids, where the primary key finds them directly. A unary `+` is
/// SQLite's documented way to say so; PostgreSQL has no planner hints, and an expression is not
/// what its index holds.
fn not_indexed(kind: BackendKind, column: &str) -> String {
    match kind {
        BackendKind::Sqlite => format!("+{column}"),
        BackendKind::Postgres => format!("({column} || '')"),
    }
}

type TurnRow = (
    String,
    Option<String>,
    i64,
    String,
    Option<String>,
    DateTime<Utc>,
    String,
);

fn turn_card(row: TurnRow) -> Result<TurnCard> {
    let (id, external_id, seq, role, speaker, at, text) = row;
    Ok(TurnCard {
        id: parse_id("messages", &id)?,
        label: external_id.unwrap_or_else(|| format!("t{seq}")),
        role,
        speaker,
        at,
        text,
    })
}

impl Search<'_> {
    /// `user`'s (external id) id and both stamp states, in one read; `None` for a user not stored.
    pub async fn snapshot(self, user: &str) -> Result<Option<ReadSnapshot>> {
        let row: Option<(String, i64, i64, i64, i64)> = self
            .read_optional(crate::tx::sql!(
                "SELECT id, memory_version, memory_floor, turn_version, turn_floor FROM users WHERE external_id = $1",
                user
            ))
            .await?;
        row.map(|(id, memory_version, memory_floor, turn_version, turn_floor)| {
            Ok(ReadSnapshot {
                user_id: parse_id::<UserId>("users", &id)?,
                memories: StampState {
                    version: memory_version,
                    floor: memory_floor,
                },
                turns: StampState {
                    version: turn_version,
                    floor: turn_floor,
                },
            })
        })
        .transpose()
    }

    /// What a memory lexicon built at `since` must re-read (every active memory with `None`): the
    /// active memories stamped after it, as (id, text, what its evidence turns said, joined), and
    /// the memories stamped after it that are no longer active. The memory version and floor are
    /// read first, so the rows are at least as new as they say; a caller bringing a lexicon
    /// forward checks `since` against this floor, not one read before.
    pub async fn memory_texts_since(self, user_id: UserId, since: Option<i64>) -> Result<(StampState, MemoryTexts)> {
        let state = self.vectors().memory_state(user_id).await?;
        // (id, text, 1 when active). With `since`, the conditions are the user and the stamp
        // only, archived rows included: on PostgreSQL a generic plan otherwise took the user's
        // active-memory index and filtered every row of theirs by stamp (100 ms at 100k).
        let (rows, evidence): (Vec<StampedText>, Vec<(String, String, String)>) = match since {
            None => (
                self.read_all(crate::tx::sql!(
                    "SELECT id, text, CAST(1 AS BIGINT) FROM memories
                     WHERE user_id = $1 AND archived_at IS NULL ORDER BY id",
                    user_id
                ))
                .await?,
                self.read_all(crate::tx::sql!(
                    "SELECT e.memory_id, msg.id, msg.content FROM memory_evidence e
                     JOIN memories m ON m.id = e.memory_id JOIN messages msg ON msg.id = e.message_id
                     WHERE m.user_id = $1 AND m.archived_at IS NULL ORDER BY msg.created_at, msg.seq",
                    user_id
                ))
                .await?,
            ),
            Some(since) => (
                self.read_all(crate::tx::sql!(
                    "SELECT id, text, CAST(CASE WHEN archived_at IS NULL THEN 1 ELSE 0 END AS BIGINT) FROM memories
                     WHERE user_id = $1 AND memory_stamp > $2 ORDER BY id",
                    user_id,
                    since
                ))
                .await?,
                self.read_all(crate::tx::sql!(
                    "SELECT e.memory_id, msg.id, msg.content FROM memories m
                     JOIN memory_evidence e ON e.memory_id = m.id JOIN messages msg ON msg.id = e.message_id
                     WHERE m.user_id = $1 AND m.memory_stamp > $2 ORDER BY msg.created_at, msg.seq",
                    user_id,
                    since
                ))
                .await?,
            ),
        };
        let parse = |id: &str| parse_id::<MemoryId>("memories", id);
        let mut texts = MemoryTexts::default();
        let mut said: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        for (id, message_id, content) in evidence {
            texts.evidence.push((parse(&id)?, parse_id("messages", &message_id)?));
            let joined = said.entry(id).or_default();
            if !joined.is_empty() {
                joined.push('\n');
            }
            joined.push_str(&content);
        }
        for (id, text, active) in rows {
            if active == 1 {
                let said = said.remove(&id).unwrap_or_default();
                texts.changed.push((parse(&id)?, text, said));
            } else {
                texts.gone.push(parse(&id)?);
            }
        }
        Ok((state, texts))
    }

    /// Every turn of `user_id` as (id, segment, speaker, text), in conversation order, with the
    /// turn version read first (a concurrent write can only make the result look older).
    pub async fn user_turn_texts(self, user_id: UserId) -> Result<(i64, Vec<TurnText>)> {
        let (state, turns) = self.turn_texts_since(user_id, None).await?;
        Ok((state.version, turns))
    }

    /// The turns of every segment of `user_id` that has a turn stamped after `since` (all of them
    /// with `None`), whole and in conversation order, with the turn version read first: what a
    /// turn index built at `since` must re-read, since a new turn also changes its neighbour's
    /// context. The state is read first, so the rows are at least as new as it says; a caller
    /// bringing an index forward checks `since` against this floor, not one read before.
    pub async fn turn_texts_since(self, user_id: UserId, since: Option<i64>) -> Result<(StampState, Vec<TurnText>)> {
        let state = self.vectors().turn_state(user_id).await?;
        let rows: Vec<(String, String, Option<String>, String)> = match since {
            None => {
                self.read_all(crate::tx::sql!(
                    "SELECT id, segment_id, speaker, content FROM messages WHERE user_id = $1 ORDER BY segment_id, seq",
                    user_id
                ))
                .await?
            }
            Some(since) => {
                self.read_all(crate::tx::sql!(
                    "SELECT id, segment_id, speaker, content FROM messages
                     WHERE user_id = $1 AND segment_id IN
                           (SELECT segment_id FROM messages WHERE user_id = $1 AND turn_stamp > $2)
                     ORDER BY segment_id, seq",
                    user_id,
                    since
                ))
                .await?
            }
        };
        let turns = rows
            .into_iter()
            .map(|(id, segment_id, speaker, text)| {
                Ok(TurnText {
                    id: parse_id("messages", &id)?,
                    segment_id: parse_id::<SegmentId>("messages", &segment_id)?,
                    speaker,
                    text,
                })
            })
            .collect::<Result<_>>()?;
        Ok((state, turns))
    }

    /// The names of the speakers of `user_id`'s turns stamped after `since`, with the turn version
    /// and floor read first: what a held turn lexicon at `since` lacks of its speakers, when the
    /// floor says no turn went away since.
    pub async fn speakers_since(self, user_id: UserId, since: i64) -> Result<(StampState, BTreeSet<String>)> {
        let state = self.vectors().turn_state(user_id).await?;
        if state.version == since {
            // Nothing stamped since: no second round trip on a search whose lexicon is current.
            return Ok((state, BTreeSet::new()));
        }
        let names: Vec<(String,)> = self
            .read_all(crate::tx::sql!(
                "SELECT DISTINCT speaker FROM messages
                 WHERE user_id = $1 AND turn_stamp > $2 AND speaker IS NOT NULL",
                user_id,
                since
            ))
            .await?;
        Ok((state, names.into_iter().map(|(name,)| name).collect()))
    }

    /// `user_id`'s active memories joined to an active entity whose every name word is among
    /// `terms`, with how many such entities each names, most first.
    pub async fn entity_memories(self, user_id: UserId, terms: &[String], limit: i64) -> Result<Vec<(MemoryId, i64)>> {
        let entities: Vec<(String, String)> = self
            .read_all(crate::tx::sql!(
                "SELECT id, normalized_name FROM entities WHERE user_id = $1 AND archived_at IS NULL",
                user_id
            ))
            .await?;
        let named: Vec<String> = entities
            .into_iter()
            .filter(|(_, name)| {
                let words: Vec<&str> = name
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .collect();
                !words.is_empty() && words.iter().all(|word| terms.iter().any(|term| term == word))
            })
            .map(|(id, _)| id)
            .collect();
        if named.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT m.id, COUNT(*) AS n FROM memory_entities me JOIN memories m ON m.id = me.memory_id
             WHERE {} = $1 AND m.archived_at IS NULL AND me.entity_id{}
             GROUP BY m.id ORDER BY n DESC, m.importance DESC, m.id LIMIT $2",
            not_indexed(self.kind(), "m.user_id"),
            in_set(self.kind(), 3)
        );
        let args = vec![Arg::from(user_id), Arg::from(limit), ids_arg(named)];
        let rows: Vec<(String, i64)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(id, n)| Ok((parse_id::<MemoryId>("memories", &id)?, n)))
            .collect()
    }

    /// `user_id`'s active memories whose time is in `[from, to)`: when they happen, else when
    /// their earliest evidence was said; with that time.
    pub async fn memories_in_range(
        self,
        user_id: UserId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(MemoryId, DateTime<Utc>)>> {
        let rows: Vec<(String, DateTime<Utc>)> = self
            .read_all(crate::tx::sql!(
                "SELECT id, at FROM (
                     SELECT m.id, COALESCE(m.happens_at,
                         (SELECT MIN(msg.created_at) FROM memory_evidence e JOIN messages msg ON msg.id = e.message_id
                          WHERE e.memory_id = m.id)) AS at
                     FROM memories m WHERE m.user_id = $1 AND m.archived_at IS NULL
                 ) timed
                 WHERE at >= $2 AND at < $3 ORDER BY at, id LIMIT $4",
                user_id,
                from,
                to,
                limit
            ))
            .await?;
        rows.into_iter()
            .map(|(id, at)| Ok((parse_id::<MemoryId>("memories", &id)?, at)))
            .collect()
    }

    /// The turns said within `span` places of each of `turn_ids` (`user_id`'s messages) in the
    /// same segment, as (turn, neighbour, places after it: negative before, whether the
    /// same speaker said both), the turn itself left out. Turns with no speaker's name (an
    /// assistant's chat, where the roles say who spoke) are the same speaker's when their roles
    /// are the same.
    pub async fn turn_neighbours(
        self,
        user_id: UserId,
        turn_ids: &[MessageId],
        span: i64,
    ) -> Result<Vec<(MessageId, MessageId, i64, bool)>> {
        if turn_ids.is_empty() || span <= 0 {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT o.id, n.id, n.seq - o.seq,
                    CASE WHEN n.speaker = o.speaker
                              OR (n.speaker IS NULL AND o.speaker IS NULL AND n.role = o.role)
                         THEN TRUE ELSE FALSE END
             FROM messages o
             JOIN messages n ON n.segment_id = o.segment_id AND n.seq >= o.seq - $3 AND n.seq <= o.seq + $3
             WHERE {} = $1 AND o.id{} AND n.id <> o.id
             ORDER BY o.id, n.seq",
            not_indexed(self.kind(), "o.user_id"),
            in_set(self.kind(), 2)
        );
        let args = vec![Arg::from(user_id), ids_arg(turn_ids), Arg::from(span)];
        let rows: Vec<(String, String, i64, bool)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(turn, neighbour, places, same_speaker)| {
                Ok((
                    parse_id("messages", &turn)?,
                    parse_id("messages", &neighbour)?,
                    places,
                    same_speaker,
                ))
            })
            .collect()
    }

    /// The importance of those of `ids` that are `user_id`'s active memories.
    pub async fn importance_of(self, user_id: UserId, ids: &[MemoryId]) -> Result<Vec<(MemoryId, f64)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, importance FROM memories WHERE {} = $1 AND archived_at IS NULL AND id{}",
            not_indexed(self.kind(), "user_id"),
            in_set(self.kind(), 2)
        );
        let args = vec![Arg::from(user_id), ids_arg(ids)];
        let rows: Vec<(String, f64)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(id, importance)| Ok((parse_id::<MemoryId>("memories", &id)?, importance)))
            .collect()
    }

    /// The cards of those of `ids` that are `user_id`'s active memories, in no set order.
    pub async fn memory_cards(self, user_id: UserId, ids: &[MemoryId]) -> Result<Vec<MemoryCard>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list = in_set(self.kind(), 2);
        let with_ids = |sql: String| (sql, vec![Arg::from(user_id), ids_arg(ids)]);
        let user = |column: &str| not_indexed(self.kind(), column);
        let (sql, args) = with_ids(format!(
            "SELECT id, text, importance, happens_at, created_at FROM memories
             WHERE {} = $1 AND archived_at IS NULL AND id{list}",
            user("user_id")
        ));
        type CardRow = (String, String, f64, Option<DateTime<Utc>>, DateTime<Utc>);
        let rows: Vec<CardRow> = self.read_all(Statement { sql: &sql, args }).await?;
        let (sql, args) = with_ids(format!(
            "SELECT e.memory_id, msg.id, msg.external_id, msg.seq, msg.role, msg.speaker, msg.created_at, msg.content
             FROM memory_evidence e JOIN messages msg ON msg.id = e.message_id
             WHERE {} = $1 AND e.memory_id{list} ORDER BY msg.created_at, msg.seq",
            user("msg.user_id")
        ));
        type EvidenceRow = (
            String,
            String,
            Option<String>,
            i64,
            String,
            Option<String>,
            DateTime<Utc>,
            String,
        );
        let evidence: Vec<EvidenceRow> = self.read_all(Statement { sql: &sql, args }).await?;
        let (sql, args) = with_ids(format!(
            "SELECT me.memory_id, en.name FROM memory_entities me JOIN entities en ON en.id = me.entity_id
             WHERE {} = $1 AND me.memory_id{list} ORDER BY en.name",
            user("en.user_id")
        ));
        let entities: Vec<(String, String)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(id, text, importance, happens_at, created_at)| {
                let memory_id = parse_id::<MemoryId>("memories", &id)?;
                Ok(MemoryCard {
                    id: memory_id,
                    text,
                    importance,
                    happens_at,
                    created_at,
                    evidence: evidence
                        .iter()
                        .filter(|row| row.0 == id)
                        .map(|row| {
                            turn_card((
                                row.1.clone(),
                                row.2.clone(),
                                row.3,
                                row.4.clone(),
                                row.5.clone(),
                                row.6,
                                row.7.clone(),
                            ))
                        })
                        .collect::<Result<_>>()?,
                    entities: entities
                        .iter()
                        .filter(|row| row.0 == id)
                        .map(|row| row.1.clone())
                        .collect(),
                })
            })
            .collect()
    }

    /// The cards of those of `ids` that are `user_id`'s turns.
    pub async fn turn_cards(self, user_id: UserId, ids: &[MessageId]) -> Result<Vec<TurnCard>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, external_id, seq, role, speaker, created_at, content FROM messages
             WHERE {} = $1 AND id{}",
            not_indexed(self.kind(), "user_id"),
            in_set(self.kind(), 2)
        );
        let args = vec![Arg::from(user_id), ids_arg(ids)];
        let rows: Vec<TurnRow> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter().map(turn_card).collect()
    }

    /// The links of `ids` to other active memories of `user_id`, in either direction, as
    /// `(one of ids, the other memory, kind, confidence)`.
    pub async fn memory_links_of(
        self,
        user_id: UserId,
        ids: &[MemoryId],
    ) -> Result<Vec<(MemoryId, MemoryId, String, f64)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // Links are read through each end's index alone (one arm of the union each), then both
        // ends checked against the user's active memories by primary key. Joining `memories`
        // twice in the same statement let PostgreSQL plan a product of the user's memories with
        // themselves (0.5 s at 1k memories, 50 s at 10k), whatever way the link condition was
        // written.
        let list = in_set(self.kind(), 1);
        let sql = format!(
            "SELECT source_id, target_id, kind, confidence FROM memory_links WHERE source_id{list}
             UNION ALL
             SELECT source_id, target_id, kind, confidence FROM memory_links WHERE target_id{list}"
        );
        let mut rows: Vec<(String, String, String, f64)> = self
            .read_all(Statement {
                sql: &sql,
                args: vec![ids_arg(ids)],
            })
            .await?;
        let ends: std::collections::BTreeSet<&str> =
            rows.iter().flat_map(|row| [row.0.as_str(), row.1.as_str()]).collect();
        let active: std::collections::HashSet<String> = if ends.is_empty() {
            std::collections::HashSet::new()
        } else {
            let sql = format!(
                "SELECT id FROM memories WHERE {} = $1 AND archived_at IS NULL AND id{}",
                not_indexed(self.kind(), "user_id"),
                in_set(self.kind(), 2)
            );
            let args = vec![Arg::from(user_id), ids_arg(&ends)];
            let found: Vec<(String,)> = self.read_all(Statement { sql: &sql, args }).await?;
            found.into_iter().map(|(id,)| id).collect()
        };
        rows.retain(|row| active.contains(&row.0) && active.contains(&row.1));
        // A link between two wanted memories came back from both lookups.
        rows.sort_by(|a, b| {
            b.3.total_cmp(&a.3)
                .then_with(|| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)))
        });
        rows.dedup_by(|a, b| (&a.0, &a.1, &a.2) == (&b.0, &b.1, &b.2));
        let wanted: std::collections::HashSet<String> = ids.iter().map(ToString::to_string).collect();
        let parse = |id: &str| parse_id::<MemoryId>("memory_links", id);
        let mut out = Vec::new();
        for (source, target, kind, confidence) in rows {
            if wanted.contains(&source) {
                out.push((parse(&source)?, parse(&target)?, kind.clone(), confidence));
            }
            if wanted.contains(&target) {
                out.push((parse(&target)?, parse(&source)?, kind, confidence));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_set_is_one_bound_json_array_on_either_backend() {
        assert_eq!(in_set(BackendKind::Sqlite, 3), " IN (SELECT value FROM json_each($3))");
        assert_eq!(
            in_set(BackendKind::Postgres, 2),
            " = ANY(ARRAY(SELECT jsonb_array_elements_text($2)))"
        );
    }
}
