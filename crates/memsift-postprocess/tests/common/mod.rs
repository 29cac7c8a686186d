//! What the relationship stage makes of one pair, shared by the tests that generate pairs.

use memsift_core::MemoryId;
use memsift_core::prompt::PromptRegistry;
use memsift_postprocess::MemoryText;
use memsift_postprocess::offline::offline_answer;
use memsift_postprocess::relationship::{SupersededEnd, newer_first, parse_relationship_answer, relationship_request};

/// Which memory the stage archives for a pair first seen as `(first, second)`.
pub fn archived(first: &MemoryText, second: &MemoryText, said: &[(MemoryId, i64)]) -> Option<MemoryId> {
    let at = |id: MemoryId| said.iter().find(|(known, _)| *known == id).map(|(_, at)| *at);
    let [(memory, candidate)] = newer_first([(first.id, second.id)], at)[..] else {
        unreachable!("one pair in, one pair out")
    };
    let text = |id: MemoryId| if id == first.id { first.clone() } else { second.clone() };
    let (memory, candidate) = (text(memory), text(candidate));
    let prompt = PromptRegistry::built_in().get("relationship").unwrap().clone();
    let request = relationship_request(&prompt, &memory, std::slice::from_ref(&candidate));
    let answer = offline_answer(&request.user_message)?;
    let verdicts = parse_relationship_answer(&answer, 1).ok()?;
    verdicts
        .iter()
        .find_map(|verdict| match verdict.kind.superseded_end()? {
            SupersededEnd::Memory => Some(memory.id),
            SupersededEnd::Candidate => Some(candidate.id),
        })
}
