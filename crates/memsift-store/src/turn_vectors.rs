//! Turn vectors: each stored message's embedding, written by the pipeline and read whole per user
//! by search, which keeps them in memory until the user's memory version moves.

use memsift_core::{MessageId, SegmentId, UserId};

use crate::handles::Vectors;
use crate::tx::{Arg, Statement, sql};
use crate::{Result, parse_id, vector_from_le_bytes, vector_to_le_bytes};

/// A message still to embed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnToEmbed {
    /// The message id.
    pub id: String,
    /// Its user.
    pub user_id: UserId,
    /// What to embed.
    pub content: String,
}

/// Where a user's stamped rows (turns, or memories) stand, for a cache of them built at some
/// version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampState {
    /// `users.turn_version` (or `memory_version`): moves whenever one of the user's turns or turn
    /// vectors (memories) is written.
    pub version: i64,
    /// `users.turn_floor` (or `memory_floor`): the version at which rows last went away. A cache
    /// built before it is read again whole; one built at or after it can be brought forward by
    /// the rows stamped since.
    pub floor: i64,
}

impl StampState {
    /// Whether a cache built at `built` can be brought forward by reading what was stamped after it.
    pub fn can_extend(self, built: i64) -> bool {
        built >= self.floor && built <= self.version
    }
}

/// A user's turn vectors of one model, with the turn version they were read at.
#[derive(Clone, Debug, PartialEq)]
pub struct UserTurnVectors {
    /// `users.turn_version` and `turn_floor`, read before the rows.
    pub state: StampState,
    /// (message, unit-length vector).
    pub rows: Vec<(MessageId, Vec<f32>)>,
}

impl Vectors<'_> {
    /// Up to `limit` messages with no embedding, oldest first.
    pub async fn turns_needing_embedding(self, limit: i64) -> Result<Vec<TurnToEmbed>> {
        let rows: Vec<(String, String, String)> = self
            .read_all(sql!(
                "SELECT id, user_id, content FROM messages WHERE embedding IS NULL
                 ORDER BY created_at, id LIMIT $1",
                limit
            ))
            .await?;
        rows.into_iter()
            .map(|(id, user_id, content)| {
                Ok(TurnToEmbed {
                    id,
                    user_id: parse_id::<UserId>("messages", &user_id)?,
                    content,
                })
            })
            .collect()
    }

    /// Stores each `(message id, vector)` as made by `model_id`, and moves the turn version of
    /// every user it touched, stamping the rows with it, so search's cached turn index of that
    /// user reads them as new.
    pub async fn set_turn_embeddings(self, model_id: &str, written: &[(TurnToEmbed, Vec<f32>)]) -> Result<()> {
        if written.is_empty() {
            return Ok(());
        }
        let mut users: Vec<UserId> = Vec::new();
        for (turn, _) in written {
            if !users.contains(&turn.user_id) {
                users.push(turn.user_id);
            }
        }
        self.write(async |tx| {
            for user_id in &users {
                // The version first: it takes the user's row lock, so no other writer can stamp
                // between this version and the rows that carry it.
                let Some(version) = tx
                    .scalar_optional::<i64>(sql!(
                        "UPDATE users SET turn_version = turn_version + 1 WHERE id = $1 RETURNING turn_version",
                        *user_id
                    ))
                    .await?
                else {
                    // Erased since its turns were read: they went with it.
                    continue;
                };
                for (turn, vector) in written.iter().filter(|(turn, _)| turn.user_id == *user_id) {
                    tx.execute(sql!(
                        "UPDATE messages SET embedding = $1, embedding_model = $2, turn_stamp = $3
                         WHERE id = $4 AND user_id = $5",
                        vector_to_le_bytes(vector),
                        model_id,
                        version,
                        turn.id.as_str(),
                        turn.user_id
                    ))
                    .await?;
                }
            }
            Ok(())
        })
        .await
    }

    /// The stored vectors of `segment_id`'s turns, each with the model that made it, normalised;
    /// turns without one (not embedded yet, or blank) are left out.
    pub async fn segment_turn_vectors(self, segment_id: SegmentId) -> Result<Vec<(MessageId, String, Vec<f32>)>> {
        let rows: Vec<(String, String, Vec<u8>)> = self
            .read_all(sql!(
                "SELECT id, embedding_model, embedding FROM messages
                 WHERE segment_id = $1 AND embedding IS NOT NULL AND embedding_model IS NOT NULL",
                segment_id
            ))
            .await?;
        let mut vectors = Vec::with_capacity(rows.len());
        for (id, model_id, bytes) in rows {
            let id = parse_id::<MessageId>("messages", &id)?;
            if let Some(vector) = unit_vector(&bytes) {
                vectors.push((id, model_id, vector));
            }
        }
        Ok(vectors)
    }

    /// `user_id`'s turn version: it moves whenever one of the user's turns or turn vectors is written,
    /// and at erasure.
    pub async fn turn_version(self, user_id: UserId) -> Result<i64> {
        Ok(self.turn_state(user_id).await?.version)
    }

    /// `user_id`'s turn version and floor (zeros for a user not stored).
    pub async fn turn_state(self, user_id: UserId) -> Result<StampState> {
        self.stamp_state(sql!(
            "SELECT turn_version, turn_floor FROM users WHERE id = $1",
            user_id
        ))
        .await
    }

    /// A user's version and floor, as `statement` selects them from `users` (zeros for a user not
    /// stored).
    pub(crate) async fn stamp_state(self, statement: Statement<'_>) -> Result<StampState> {
        let row: Option<(i64, i64)> = self.read_optional(statement).await?;
        let (version, floor) = row.unwrap_or((0, 0));
        Ok(StampState { version, floor })
    }

    /// The turn vectors of `user_id` made by `model_id` (with `since`, only those of turns stamped
    /// after it), normalised, with the turn version read first (a concurrent write can only make
    /// the result look older, never newer).
    pub async fn user_turn_vectors(
        self,
        user_id: UserId,
        model_id: &str,
        since: Option<i64>,
    ) -> Result<UserTurnVectors> {
        let state = self.turn_state(user_id).await?;
        let rows: Vec<(String, Vec<u8>)> = self
            .read_all(Statement {
                sql: "SELECT id, embedding FROM messages
                      WHERE user_id = $1 AND embedding_model = $2 AND embedding IS NOT NULL AND turn_stamp > $3",
                args: vec![
                    Arg::from(user_id),
                    Arg::from(model_id),
                    Arg::from(since.unwrap_or(i64::MIN)),
                ],
            })
            .await?;
        let mut vectors = Vec::with_capacity(rows.len());
        for (id, bytes) in rows {
            let id = parse_id::<MessageId>("messages", &id)?;
            if let Some(vector) = unit_vector(&bytes) {
                vectors.push((id, vector));
            }
        }
        Ok(UserTurnVectors { state, rows: vectors })
    }
}

/// A stored vector scaled to unit length; `None` for a blank turn's empty vector, a zero or
/// non-finite one, or bytes that are not whole floats.
fn unit_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    let mut vector = vector_from_le_bytes(bytes)?;
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    vector.iter_mut().for_each(|value| *value /= norm);
    Some(vector)
}
