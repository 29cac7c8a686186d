//! The offline heuristic extractor: deterministic rules over a segment's turns, no provider.
//!
//! It returns items in the extraction output contract, serialised as the raw output of a request,
//! so its results go through the same processor and apply path as a model's.
//!
//! Every speaker who is not the assistant is a source, and each memory is about the speaker who
//! said it, written in the third person with their name ("The user" when a turn names nobody):
//! a user talking to an assistant and people talking to each other are read the same way. Two
//! kinds of rule read a sentence. The rule table (`rules`) knows the fixed shapes of facts told
//! to an assistant ("I live in …", "my sister Anna …") and says them canonically; the statement
//! rule (`statement`) keeps any other first-person statement with words of its own, rewritten
//! about its speaker with its dates resolved. Questions, hedges, hypotheticals, talk to or about
//! the other person and fragments that only make sense inside the conversation are dropped
//! rather than guessed at (`chatter`). A shared photo counts as what the speaker showed (`photo`).

#![deny(missing_docs)]

mod chatter;
mod dates;
mod entities;
mod photo;
pub mod reading;
mod remark;
mod rules;
mod speech;
mod statement;
mod text;

use std::collections::{BTreeSet, HashMap};

use chrono::NaiveDate;
use memsift_core::contract::{ExtractedEntity, ExtractedItem, Turn};
use memsift_core::status::{Role, Temporal};
use regex::{Captures, Regex};

use crate::dates::{DateHit, Direction};
use crate::rules::{COMPILED, Category, Rule};
use crate::statement::Speaker;

/// The version of the rule set, recorded on requests like a prompt version.
pub const RULES_VERSION: &str = "heuristic@4";

/// Memories shorter than this say nothing useful on their own.
const MIN_TEXT_CHARS: usize = 10;

/// A statement is kept beside the rule-table items of its sentence when it adds this many words.
const MIN_NEW_WORDS: usize = 3;

/// A statement and the sentences that carry it on stop growing at this many words.
const MAX_JOINED_WORDS: usize = 60;

/// How sure a photo memory is: the caption is a model's description of the picture.
const PHOTO_CONFIDENCE: f64 = 0.5;

/// Extracts durable facts from the turns of a chunk, about each speaker who is not the assistant.
///
/// Items come out in turn order, then sentence order, then rule order; an identical text seen
/// again keeps its first position and gains the later turn as evidence.
pub fn extract(turns: &[Turn]) -> Vec<ExtractedItem> {
    let chunk = Chunk::new(turns);
    let mut items: Vec<ExtractedItem> = Vec::new();
    let mut position_by_text: HashMap<String, usize> = HashMap::new();
    for turn in turns.iter().filter(|turn| turn.role == Role::User) {
        for item in extract_turn(turn, &chunk, Some(turn.at.date_naive())) {
            match position_by_text.get(&item.text) {
                Some(&position) => merge_duplicate(&mut items[position], item),
                None => {
                    position_by_text.insert(item.text.clone(), items.len());
                    items.push(item);
                }
            }
        }
    }
    items
}

/// [`extract`] for turns whose time is not known: date phrases stay as said and the rules that
/// need a resolved date do not fire.
fn extract_undated(turns: &[Turn]) -> Vec<ExtractedItem> {
    let chunk = Chunk::new(turns);
    turns
        .iter()
        .filter(|turn| turn.role == Role::User)
        .flat_map(|turn| extract_turn(turn, &chunk, None))
        .collect()
}

/// What the whole chunk tells about each turn: who else speaks, and whom each speaker introduced.
struct Chunk {
    participants: Vec<String>,
    /// Per speaker (as [`Subject::for_turn`] names them), the people they introduced by relation and name.
    acquaintances: HashMap<String, Vec<(String, String)>>,
}

impl Chunk {
    fn new(turns: &[Turn]) -> Self {
        let mut said_by: HashMap<String, String> = HashMap::new();
        for turn in turns.iter().filter(|turn| turn.role == Role::User) {
            let said = said_by.entry(Subject::for_turn(turn).name).or_default();
            said.push_str(&turn.content);
            said.push('\n');
        }
        let acquaintances = said_by
            .into_iter()
            .map(|(speaker, said)| (speaker, speech::acquaintances(&text::normalise(&said))))
            .collect();
        Chunk {
            participants: participants(turns),
            acquaintances,
        }
    }
}

/// [`extract`], serialised as the JSON array a model would return.
pub fn extract_json(turns: &[Turn]) -> String {
    serde_json::to_string(&extract(turns)).expect("extracted items always serialise: plain strings and numbers")
}

/// The names of everyone who speaks in the chunk, assistants included.
fn participants(turns: &[Turn]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for turn in turns {
        if let Some(name) = display_name(turn)
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

/// A turn's speaker name as memories write it: its words joined by single spaces, since every
/// memory text is; `None` when it names nobody.
fn display_name(turn: &Turn) -> Option<String> {
    let name = turn
        .speaker
        .as_deref()?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!name.is_empty()).then_some(name)
}

fn merge_duplicate(existing: &mut ExtractedItem, duplicate: ExtractedItem) {
    for label in duplicate.evidence_turns {
        if !existing.evidence_turns.contains(&label) {
            existing.evidence_turns.push(label);
        }
    }
    // Two rules reading the same text may disagree on privacy; the cautious answer wins.
    existing.sensitive |= duplicate.sensitive;
}

/// Who a memory is about, as the sentence subject and its possessive.
struct Subject {
    name: String,
    possessive: String,
    /// The name as it reads inside a sentence ("the user" rather than "The user").
    inline: String,
}

impl Subject {
    fn for_turn(turn: &Turn) -> Self {
        match display_name(turn) {
            Some(name) => Subject {
                possessive: format!("{name}'s"),
                inline: name.clone(),
                name,
            },
            None => Subject {
                name: "The user".to_owned(),
                possessive: "The user's".to_owned(),
                inline: "the user".to_owned(),
            },
        }
    }
}

/// The memories of one turn; with `today` unknown, date phrases are left as said and rules
/// that need a date do not fire.
fn extract_turn(turn: &Turn, chunk: &Chunk, today: Option<NaiveDate>) -> Vec<ExtractedItem> {
    let subject = Subject::for_turn(turn);
    let (spoken, captions) = photo::split_captions(&turn.content);
    let normalised = text::normalise(&spoken);
    let others: Vec<String> = chunk
        .participants
        .iter()
        .filter(|name| **name != subject.name)
        .cloned()
        .collect();
    let acquaintances = chunk.acquaintances.get(&subject.name).map_or(&[][..], Vec::as_slice);
    let mut items: Vec<ExtractedItem> = Vec::new();
    // The statement the previous sentence made, which the next may carry on: where its first
    // variant sits, and where the statement itself does.
    let mut open_statement: Option<(usize, usize)> = None;
    // The companion the turn named last, whom a later "we" includes.
    let mut companion: Option<String> = None;
    // Whether the speaker's own words said what their picture shows.
    let mut described_photo = false;
    for sentence in text::sentences(&normalised) {
        let previous = open_statement.take();
        let plural = speech::plural_subject(&subject.inline, companion.as_deref(), &sentence);
        if let Some(named) = speech::last_companion(&sentence) {
            companion = Some(named);
        }
        let speaker = Speaker {
            name: &subject.inline,
            plural: &plural,
            others: &others,
            acquaintances,
        };
        if text::skip_sentence(&sentence) {
            continue;
        }
        if !captions.is_empty()
            && let Some(presented) = photo::presented(text::strip_preamble(&sentence))
        {
            // The speaker's words for the picture say what it is to them; the caption only
            // says what it looks like.
            if let Some(item) = statement::shown(&presented, &speaker, today, &turn.label) {
                items.push(item);
                described_photo = true;
            }
            continue;
        }
        let mut from_table = Vec::new();
        for clause in text::clauses(&sentence) {
            if text::is_uncertain(&clause) || chatter::names_another_speaker(&clause, &others) {
                continue;
            }
            from_table.extend(apply_rules(&clause, &subject, today, &turn.label));
        }
        let general = statement::statement(&sentence, &speaker, today, &turn.label)
            .or_else(|| {
                // A remark first, then the statement: "That's so cool - I went to a concert too."
                let tail = text::first_person_tail(&sentence)?;
                statement::statement(tail, &speaker, today, &turn.label)
            })
            .filter(|general| !covered(&general.text, &from_table, &subject.name));
        if general.is_none()
            && from_table.is_empty()
            && let Some((first, position)) = previous
            && items[position].text.split_whitespace().count() + sentence.split_whitespace().count() <= MAX_JOINED_WORDS
            && let Some(addition) = statement::elaboration(&sentence, &speaker, today)
        {
            // One sentence carries a statement on; a third is a story, and stories match nothing.
            // The statement stays a memory of its own too: it is the fact a search for it finds,
            // and the joined one tells how it went. The joined one goes first: the processor
            // keeps the first of two near-duplicates, and it is the one that says more.
            let mut joined = items[position].clone();
            statement::join(&mut joined, addition);
            items.insert(first, joined);
            continue;
        }
        let table_fired = !from_table.is_empty();
        items.extend(from_table);
        match general {
            Some(general) => {
                // The fact without its evaluative tail goes before the whole statement, for the
                // same reason: of the two, it is the one a later question asks about.
                let first = items.len();
                items.extend(statement::without_tail(&general, &subject.name));
                open_statement = Some((first, items.len()));
                items.push(general);
            }
            None if !table_fired => items.extend(remark::remark(&sentence, &speaker, today, &turn.label)),
            None => {}
        }
    }
    // A caption says only what a picture looks like; it stands for the turn when the turn said
    // nothing else worth keeping (measured on LoCoMo, captions beside the speaker's own
    // statements matched a benchmark observation about 1 time in 100).
    let said_something = described_photo || !items.is_empty();
    for caption in captions.iter().filter(|_| !said_something) {
        if let Some(text) = photo::shared_photo(&subject.name, &normalised, caption) {
            let mut item = ExtractedItem::new(text, Temporal::OneOff, vec![turn.label.clone()]);
            item.confidence = PHOTO_CONFIDENCE;
            item.happens_at = today.map(|today| today.format("%Y-%m-%d").to_string());
            items.push(item);
        }
    }
    items
}

/// Whether the rule-table items already say what a statement says: it adds fewer than
/// [`MIN_NEW_WORDS`] words of its own. Words compare by their first four letters, so "name",
/// "named" and "name's" are one word.
fn covered(statement: &str, from_table: &[ExtractedItem], speaker: &str) -> bool {
    if from_table.is_empty() {
        return false;
    }
    let stem = |word: String| -> String { word.chars().take(4).collect() };
    let said: BTreeSet<String> = from_table
        .iter()
        .flat_map(|item| {
            chatter::content_words(&item.text, speaker)
                .map(stem)
                .collect::<Vec<_>>()
        })
        .collect();
    // A date phrase is no news of its own ("in the week of 27 April 2026"): the table's item
    // says the same fact.
    let new_words: BTreeSet<String> = chatter::content_words(statement, speaker)
        .filter(|word| !dates::is_date_word(word))
        .map(stem)
        .filter(|word| !said.contains(word))
        .collect();
    new_words.len() < MIN_NEW_WORDS
}

/// Runs the rule table over one clause; at most one rule per category fires.
fn apply_rules(clause: &str, subject: &Subject, today: Option<NaiveDate>, label: &str) -> Vec<ExtractedItem> {
    let date = today.and_then(|today| dates::find_date(clause, today));
    let dateless = date.as_ref().map(|hit| without_span(clause, hit));
    let mut fired: Vec<Category> = Vec::new();
    let mut items = Vec::new();
    for compiled in COMPILED.iter() {
        let rule = compiled.rule;
        if fired.contains(&rule.category) {
            continue;
        }
        let (haystack, hit) = match (rule.needs_date, &dateless, &date) {
            (false, _, _) => (clause, None),
            (true, Some(dateless), Some(hit)) if hit.direction != Direction::Past => (dateless.as_str(), Some(hit)),
            (true, _, _) => continue,
        };
        let Some(caps) = compiled.regex.captures(haystack) else {
            continue;
        };
        let Some(values) = captured_values(&compiled.regex, &caps) else {
            continue;
        };
        let Some(item) = build_item(rule, &values, subject, hit, clause, label) else {
            continue;
        };
        fired.push(rule.category);
        items.push(item);
    }
    items
}

/// The clause with its date phrase cut out, so plan rules see "I'm flying to Rome".
fn without_span(clause: &str, hit: &DateHit) -> String {
    let joined = format!("{} {}", &clause[..hit.start], &clause[hit.end..]);
    joined
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches([',', '.', ' '])
        .to_owned()
}

fn build_item(
    rule: &Rule,
    values: &HashMap<String, String>,
    subject: &Subject,
    hit: Option<&DateHit>,
    clause: &str,
    label: &str,
) -> Option<ExtractedItem> {
    let rendered = render(rule.template, values, subject, hit)?;
    let text = tidy(&rendered);
    if text.chars().count() < MIN_TEXT_CHARS {
        return None;
    }
    let temporal = if rule.temporal == Temporal::Durable && rules::RECURRING.is_match(clause) {
        Temporal::Recurring
    } else {
        rule.temporal
    };
    let mut item = ExtractedItem::new(text, temporal, vec![label.to_owned()]);
    item.confidence = rule.confidence;
    item.sensitive = rule.sensitive || rules::mentions_private_detail(clause);
    item.happens_at = hit.map(|hit| hit.date.format("%Y-%m-%d").to_string());
    item.entities = entities(rule, values);
    Some(item)
}

/// Cleans every matched group; one refused or implausible group refuses the whole rule.
fn captured_values(regex: &Regex, caps: &Captures<'_>) -> Option<HashMap<String, String>> {
    let mut values = HashMap::new();
    for (index, name) in regex.capture_names().enumerate() {
        let (Some(name), Some(group)) = (name, caps.get(index)) else {
            continue;
        };
        let raw = group.as_str();
        let value = if raw.trim().is_empty() {
            String::new()
        } else if rules::VERBATIM_GROUPS.contains(&name) {
            // A repetition phrase may open the clause ("Every Monday, I …") but sits mid-sentence here.
            let squashed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
            if name == "every" {
                lowercase_first(&squashed)
            } else {
                squashed
            }
        } else {
            text::clean_capture(raw)?
        };
        if !rules::plausible(name, &value) {
            return None;
        }
        values.insert(name.to_owned(), value);
    }
    Some(values)
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Fills a template; `None` when a required group is missing.
fn render(
    template: &str,
    values: &HashMap<String, String>,
    subject: &Subject,
    hit: Option<&DateHit>,
) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find(['[', '{']) {
        out.push_str(&rest[..start]);
        let opener = rest[start..].chars().next().unwrap_or('{');
        if opener == '[' {
            let end = start + rest[start..].find(']')?;
            if let Some(section) = render(&rest[start + 1..end], values, subject, hit) {
                out.push_str(&section);
            }
            rest = &rest[end + 1..];
        } else {
            let end = start + rest[start..].find('}')?;
            out.push_str(&placeholder(&rest[start + 1..end], values, subject, hit)?);
            rest = &rest[end + 1..];
        }
    }
    out.push_str(rest);
    Some(out)
}

fn placeholder(
    key: &str,
    values: &HashMap<String, String>,
    subject: &Subject,
    hit: Option<&DateHit>,
) -> Option<String> {
    let value = |name: &str| values.get(name).filter(|value| !value.is_empty()).cloned();
    match key {
        "S" => Some(subject.name.clone()),
        "P" => Some(subject.possessive.clone()),
        "date" => hit.map(|hit| hit.date.format("%Y-%m-%d").to_string()),
        "monthday" => hit.map(|hit| hit.date.format("%B %-d").to_string()),
        _ => match key.split_once(':') {
            Some(("a", name)) => value(name).map(|v| text::with_article(&v)),
            Some(("v", name)) => value(name).map(|v| text::third_person_verb(&v)),
            _ => values.get(key).cloned(),
        },
    }
}

/// Collapses spaces left by empty groups and makes the sentence start with a capital.
fn tidy(rendered: &str) -> String {
    let collapsed = rendered.split_whitespace().collect::<Vec<_>>().join(" ");
    // An empty group before the full stop leaves a space; a name's own " ." stays as written.
    let collapsed = match collapsed.strip_suffix(" .") {
        Some(body) => format!("{body}."),
        None => collapsed,
    };
    speech::capitalise_first(&collapsed)
}

fn entities(rule: &Rule, values: &HashMap<String, String>) -> Vec<ExtractedEntity> {
    let mut found: Vec<ExtractedEntity> = Vec::new();
    for (group, kind) in rule.entities {
        let Some(value) = values.get(*group) else { continue };
        let name = value
            .strip_prefix("the ")
            .or_else(|| value.strip_prefix("The "))
            .unwrap_or(value);
        // Only proper names become entities; "a small startup" is not one.
        if !name.chars().next().is_some_and(char::is_uppercase) {
            continue;
        }
        let entity = ExtractedEntity {
            name: name.to_owned(),
            kind: (*kind).to_owned(),
        };
        if !found.contains(&entity) {
            found.push(entity);
        }
    }
    found
}
