//! The store conformance suite: every case runs on a fresh SQLite file and a fresh PostgreSQL database.
//!
//! PostgreSQL is real (never mocked). Its admin URL comes from `MEMSIFT_TEST_PG_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`; each test creates and drops its own database.
//! If the server is unreachable the PostgreSQL tests fail: they never skip.

mod apply;
mod batches;
mod cases;
mod drops;
mod erasure;
mod errors;
mod helpers;
mod lanes;
mod listings;
mod migrations;
mod postprocess;
mod races;
mod revisions;
mod schedules;
mod search;
mod segments;
mod texts;
mod tls;
mod vectors;

/// Each case runs on both backends; a case listed under `at` starts from the schema of that
/// migration instead of the latest (it migrates the rest itself).
macro_rules! store_suite {
    (cases: [$($case:ident),+ $(,)?], at: [$(($version:literal, $older_case:ident)),* $(,)?] $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    let db = memsift_store::testing::TestDb::sqlite().await;
                    crate::cases::$case(&db.store).await;
                    db.finish().await;
                }
            )+
            $(
                #[tokio::test]
                async fn $older_case() {
                    let db = memsift_store::testing::TestDb::sqlite_at(Some($version)).await;
                    crate::cases::$older_case(&db.store).await;
                    db.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let db = memsift_store::testing::TestDb::postgres().await;
                    crate::cases::$case(&db.store).await;
                    db.finish().await;
                }
            )+
            $(
                #[tokio::test]
                async fn $older_case() {
                    let db = memsift_store::testing::TestDb::postgres_at(Some($version)).await;
                    crate::cases::$older_case(&db.store).await;
                    db.finish().await;
                }
            )*
        }
    };
}

store_suite!(cases: [
    migrations_create_the_whole_data_model,
    every_foreign_key_has_an_index_that_leads_with_it,
    ingest_gives_each_message_one_segment_and_closes_on_boundary,
    an_idle_gap_inside_the_input_starts_a_new_segment,
    reimporting_the_same_messages_adds_nothing,
    an_ingest_counts_replaced_text_and_names_changed_repeats,
    a_failed_ingest_leaves_the_store_as_it_was,
    idle_segments_close_by_the_injected_clock,
    concurrent_claims_take_disjoint_segments,
    a_claim_takes_the_oldest_due_segments_of_every_kind_a_page_at_a_time,
    a_plan_from_a_worker_whose_claim_lapsed_and_was_taken_over_is_refused,
    claims_take_exactly_the_due_segments_oldest_first_over_generated_histories,
    apply_writes_a_result_exactly_once,
    a_segment_is_extracted_only_when_every_chunk_is_applied,
    a_cut_answers_continuation_is_planned_with_its_apply_and_holds_its_segment_open,
    a_failed_continuation_has_attempts_of_its_own,
    the_same_fact_from_two_segments_is_stored_once,
    the_keys_an_answer_names_are_read_from_the_users_memories_alone,
    a_segment_goes_dead_after_max_attempts,
    entities_are_upserted_and_joined,
    memory_listings_are_scoped_by_user,
    a_read_counts_once_for_each_of_the_users_active_memories_it_names,
    ids_match_by_their_start_or_their_end_within_their_user,
    an_embedding_round_trips_as_little_endian_f32,
    embeddings_are_written_only_within_their_user,
    vectors_of_another_model_or_dimension_are_reported_not_mixed,
    a_write_elsewhere_bumps_the_version_and_is_read_back_since,
    a_memory_index_reads_only_what_changed_since_it_was_built_until_a_memory_is_deleted,
    apply_stores_each_items_vector_with_its_model,
    referenced_memories_are_the_owners_active_ones_in_order,
    erasing_a_user_removes_their_data_keeps_tombstones_and_spares_others,
    the_cost_view_sums_tokens_by_user_stage_and_lane,
    revisions_are_journaled_and_undo_restores_the_exact_prior_rows,
    scoring_archives_the_lowest_under_the_floor_capped_and_undoably,
    two_owners_racing_for_one_tick_give_exactly_one_run,
    a_live_lease_blocks_the_next_tick_until_it_is_finished,
    an_expired_lease_lets_another_owner_take_over,
    a_tick_already_run_is_not_run_again,
    several_candidates_of_one_memory_each_get_their_own_link,
    a_confident_supersedes_archives_the_end_its_kind_names_within_the_cap_and_undo_restores_it,
    memory_said_at_reads_the_latest_evidence_turn_or_the_write_time,
    consolidation_moves_links_both_ways_and_undo_restores_the_exact_rows,
    consolidation_refuses_archived_members_duplicates_and_a_full_cap,
    refinement_needs_length_age_and_reads_and_stops_after_three_rejections,
    a_split_refinement_replaces_one_memory_with_several_and_undo_restores_it,
    entity_merges_are_validated_and_move_every_join_to_the_target,
    a_segment_keeps_one_live_summary,
    a_failed_stage_request_gets_one_successor_per_attempt,
    a_reviewer_narrowing_is_journaled_and_undone_exactly,
    undoing_an_entity_merge_keeps_joins_added_after_it,
    a_duplicate_passes_its_evidence_to_the_stored_memory,
    every_stage_verdict_ends_its_request_applied,
    any_text_is_stored_the_same_on_both_backends,
    a_database_migrated_before_the_comments_were_reworded_still_starts,
    a_paused_lane_holds_its_work_unspent_and_rerouting_moves_it,
    lane_health_keeps_the_last_state_of_each_lane_and_the_live_processes,
    a_reconcile_miss_remembers_whether_the_create_was_called,
    scoring_archives_one_memory_per_run_for_a_user_with_fewer_than_twenty,
    each_memory_records_the_model_that_produced_it,
    a_nul_in_an_error_text_is_stored_as_the_replacement_character,
    drops_are_counted_by_reason_once_and_read_back_typed,
    memory_texts_follow_every_memory_write_and_stay_within_their_user,
    a_turn_card_is_shown_only_to_its_own_user,
    every_turn_is_read_in_order_and_a_new_turn_moves_the_turn_version,
    a_turn_index_reads_only_what_changed_since_it_was_built_until_turns_go_away,
    a_segments_stored_turn_vectors_are_read_with_their_model,
    a_turns_neighbours_are_read_within_its_segment_and_its_user,
    an_erasure_racing_any_write_of_the_user_leaves_nothing_of_them,
    parallel_appends_to_one_conversation_all_succeed_with_distinct_sequence_numbers,
    no_message_time_keeps_a_conversation_open_past_its_idle_timeout,
    erasure_fingerprints_every_item_of_the_users_raw_outputs,
    every_spelling_of_a_user_id_reaches_one_user_or_is_refused,
], at: [
    (6, a_populated_database_keeps_every_row_through_later_migrations),
]);
