//! Property tests for damaged responses: whatever a model does to a valid response (cut it anywhere and add a note,
//! wrap it in prose, fences or an object, write it with other quotes, literals, comments, commas or a byte order
//! mark), every complete item comes out exactly as the undamaged response gives it, and nothing half-written does.
//!
//! Items are generated in the full and in the compact form (fields at their default left out), with accented,
//! CJK and emoji text. The reference is the undamaged list of the complete items, written by serde_json in the full
//! form, so a default the processor failed to fill would show up as a difference too.

use std::collections::BTreeMap;

use memsift_core::{MemoryId, MessageId};
use memsift_processor::{DropReason, ProcessInput, ProcessOutput, process};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Short ids the request's context knows, and one it does not.
const SHORT_IDS: [&str; 3] = ["ctx00001", "ctx00002", "nope0000"];
/// Turn labels of the chunk, and one from elsewhere.
const TURN_LABELS: [&str; 3] = ["t1", "t2", "D9:9"];
const TEMPORALS: [&str; 4] = ["durable", "one_off", "recurring", "unknown"];
const RELATIONSHIPS: [&str; 3] = ["supersedes", "causes", "conflicts"];
const ENTITY_KINDS: [&str; 6] = ["person", "PERSON", "place", "org", "pet", "event"];
const DATES: [&str; 4] = ["2024-05-03", "2024-05-03T10:00:00", "2024-05-03T10:00:00Z", "next week"];
const NON_ASCII_WORDS: [&str; 14] = [
    "café",
    "naïve",
    "Zoë",
    "São",
    "Ærø",
    "über",
    "niño",
    "東京",
    "日本語",
    "김치",
    "🎉",
    "🐶",
    "👩‍🍳",
    "Ελλάδα",
];
/// What models write after a cut, or nothing. Arbitrary notes come from [`note`] too.
const NOTES: [&str; 7] = [
    "",
    "\n(output truncated)",
    "...",
    "…",
    "\n\n[truncated]",
    "\n\nNote: I stopped here because of the length limit.",
    " (continued in the next message: \"more\", 'more')",
];
const PROSE_BEFORE: [&str; 5] = [
    "Here are the memories I extracted:",
    "Sure! Here's the JSON (one item per fact):",
    "I found these [see below]:",
    "Based on the conversation, {one per line}:",
    "Voilà — les souvenirs : 日本語",
];
const PROSE_AFTER: [&str; 4] = [
    "Let me know if you need anything else.",
    "Hope that helps :) {\"done\": true}",
    "Note: dates are in UTC [approx], and \"sensitive\" is a guess.",
    "Ich hoffe, das hilft! 🎉",
];

/// One item of a valid response.
#[derive(Clone, Debug)]
struct Item {
    text: String,
    /// In hundredths.
    confidence: u8,
    happens_at: Option<&'static str>,
    expires_at: Option<&'static str>,
    sensitive: bool,
    temporal: &'static str,
    relationship_type: Option<&'static str>,
    related: Vec<&'static str>,
    consolidates: Vec<&'static str>,
    linking_hints: Vec<u64>,
    entities: Vec<(String, &'static str)>,
    evidence: Vec<&'static str>,
    /// Which fields at their default this item leaves out (bit per field, in [`Item::optional_fields`] order).
    compact: u16,
}

/// A value as the damaged writer writes it.
#[derive(Clone, Debug)]
enum Node {
    Null,
    Bool(bool),
    Number(String),
    Text(String),
    List(Vec<Node>),
    Object(Vec<(&'static str, Node)>),
}

impl Item {
    fn texts(values: &[&'static str]) -> Node {
        Node::List(values.iter().map(|value| Node::Text((*value).to_owned())).collect())
    }

    fn optional(value: Option<&'static str>) -> Node {
        value.map_or(Node::Null, |value| Node::Text(value.to_owned()))
    }

    /// The fields after `text` and `confidence`, each with whether it is at its default.
    fn optional_fields(&self) -> Vec<(&'static str, Node, bool)> {
        let entities = Node::List(
            self.entities
                .iter()
                .map(|(name, kind)| {
                    Node::Object(vec![
                        ("name", Node::Text(name.clone())),
                        ("kind", Node::Text((*kind).to_owned())),
                    ])
                })
                .collect(),
        );
        vec![
            ("happens_at", Self::optional(self.happens_at), self.happens_at.is_none()),
            ("expires_at", Self::optional(self.expires_at), self.expires_at.is_none()),
            ("sensitive", Node::Bool(self.sensitive), !self.sensitive),
            (
                "temporal",
                Node::Text(self.temporal.to_owned()),
                self.temporal == "unknown",
            ),
            (
                "relationship_type",
                Self::optional(self.relationship_type),
                self.relationship_type.is_none(),
            ),
            (
                "related_memory_ids",
                Self::texts(&self.related),
                self.related.is_empty(),
            ),
            (
                "consolidates_memory_ids",
                Self::texts(&self.consolidates),
                self.consolidates.is_empty(),
            ),
            (
                "linking_hints",
                Node::List(
                    self.linking_hints
                        .iter()
                        .map(|hint| Node::Number(hint.to_string()))
                        .collect(),
                ),
                self.linking_hints.is_empty(),
            ),
            ("entities", entities, self.entities.is_empty()),
            ("evidence_turns", Self::texts(&self.evidence), self.evidence.is_empty()),
        ]
    }

    /// The item as the damaged writer writes it: compact fields at their default are left out.
    fn node(&self) -> Node {
        let mut fields = vec![
            ("text", Node::Text(self.text.clone())),
            (
                "confidence",
                Node::Number(format!("{}.{:02}", self.confidence / 100, self.confidence % 100)),
            ),
        ];
        for (bit, (name, value, at_default)) in self.optional_fields().into_iter().enumerate() {
            if !(at_default && self.compact & (1 << bit) != 0) {
                fields.push((name, value));
            }
        }
        Node::Object(fields)
    }

    /// The item in full, as serde_json writes it: the undamaged reference.
    fn reference(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("text".into(), json!(self.text));
        object.insert("confidence".into(), json!(f64::from(self.confidence) / 100.0));
        for (name, value, _) in self.optional_fields() {
            object.insert(name.into(), node_to_json(&value));
        }
        Value::Object(object)
    }

    /// The item with its texts fit for a quote style: only double quotes escape a double quote, so other styles
    /// write texts without one (models do not put one inside a single-quoted text either).
    fn for_quotes(&self, quotes: Quotes) -> Item {
        let mut item = self.clone();
        if quotes != Quotes::Double {
            item.text = item.text.replace('"', "");
            for (name, _) in &mut item.entities {
                *name = name.replace('"', "");
            }
        }
        item
    }
}

fn node_to_json(node: &Node) -> Value {
    match node {
        Node::Null => Value::Null,
        Node::Bool(flag) => json!(flag),
        Node::Number(number) => serde_json::from_str(number).unwrap_or(Value::Null),
        Node::Text(text) => json!(text),
        Node::List(values) => Value::Array(values.iter().map(node_to_json).collect()),
        Node::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, value)| ((*name).to_owned(), node_to_json(value)))
                .collect(),
        ),
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Quotes {
    #[default]
    Double,
    /// Python's repr: single quotes, apostrophes left inside texts unescaped.
    Single,
    /// “…” as word processors and some models write them.
    Smart,
}

/// What is done to a valid response.
#[derive(Clone, Debug, Default)]
struct Damage {
    quotes: Quotes,
    python_literals: bool,
    comments: bool,
    trailing_commas: bool,
    pretty: bool,
    /// `\u00e9` and surrogate pairs instead of raw UTF-8 (double quotes only).
    escape_non_ascii: bool,
    byte_order_mark: bool,
    /// The key of an object holding the list, and whether a scalar field comes before it.
    wrapper: Option<(String, bool)>,
    fence: bool,
    prose_before: Option<String>,
    prose_after: Option<String>,
    /// Where the text is cut (a fraction of its length) and what follows the cut.
    cut: Option<(f64, String)>,
}

/// Writes nodes with a [`Damage`]'s syntax.
struct Writer<'a> {
    damage: &'a Damage,
    out: String,
    /// Byte offsets just past each element of the top-level list.
    element_ends: Vec<usize>,
}

impl Writer<'_> {
    fn string(&mut self, text: &str) {
        match self.damage.quotes {
            Quotes::Double => {
                self.out.push('"');
                for c in text.chars() {
                    match c {
                        '"' => self.out.push_str("\\\""),
                        '\\' => self.out.push_str("\\\\"),
                        '\n' => self.out.push_str("\\n"),
                        c if c.is_control() => self.out.push_str(&format!("\\u{:04x}", u32::from(c))),
                        c if !c.is_ascii() && self.damage.escape_non_ascii => {
                            let mut units = [0u16; 2];
                            for unit in c.encode_utf16(&mut units) {
                                self.out.push_str(&format!("\\u{unit:04x}"));
                            }
                        }
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            Quotes::Single => {
                self.out.push('\'');
                self.out.push_str(text);
                self.out.push('\'');
            }
            Quotes::Smart => {
                self.out.push('\u{201C}');
                self.out.push_str(text);
                self.out.push('\u{201D}');
            }
        }
    }

    fn newline(&mut self, depth: usize) {
        if self.damage.pretty {
            self.out.push('\n');
            self.out.push_str(&"  ".repeat(depth));
        }
    }

    fn node(&mut self, node: &Node, depth: usize) {
        let python = self.damage.python_literals;
        match node {
            Node::Null => self.out.push_str(if python { "None" } else { "null" }),
            Node::Bool(true) => self.out.push_str(if python { "True" } else { "true" }),
            Node::Bool(false) => self.out.push_str(if python { "False" } else { "false" }),
            Node::Number(number) => self.out.push_str(number),
            Node::Text(text) => self.string(text),
            Node::List(values) => {
                self.out.push('[');
                for (index, value) in values.iter().enumerate() {
                    if index > 0 {
                        self.out.push_str(", ");
                    }
                    self.node(value, depth + 1);
                }
                if self.damage.trailing_commas && !values.is_empty() {
                    self.out.push(',');
                }
                self.out.push(']');
            }
            Node::Object(fields) => {
                self.out.push('{');
                for (index, (name, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        self.out.push_str(", ");
                    }
                    self.newline(depth + 1);
                    self.string(name);
                    self.out.push_str(": ");
                    self.node(value, depth + 1);
                    if self.damage.comments && index == 0 {
                        self.out.push_str(" /* from the chat: \"quoted\", [x] */");
                    }
                }
                if self.damage.trailing_commas && !fields.is_empty() {
                    self.out.push(',');
                }
                self.newline(depth);
                self.out.push('}');
            }
        }
    }

    /// The top-level list, recording where each element ends.
    fn list(&mut self, items: &[Node], depth: usize) {
        self.out.push('[');
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.out.push(',');
            }
            self.newline(depth + 1);
            if self.damage.comments {
                self.out.push_str(&format!("// memory {index} {{see below}}\n"));
            }
            self.node(item, depth + 1);
            self.element_ends.push(self.out.len());
        }
        if self.damage.trailing_commas && !items.is_empty() {
            self.out.push(',');
        }
        self.newline(depth);
        self.out.push(']');
    }
}

/// The damaged text and how many items it holds whole.
fn render(items: &[Item], damage: &Damage) -> (String, usize) {
    let nodes: Vec<Node> = items.iter().map(Item::node).collect();
    let mut writer = Writer {
        damage,
        out: String::new(),
        element_ends: Vec::new(),
    };
    if damage.byte_order_mark {
        writer.out.push('\u{FEFF}');
    }
    if let Some(prose) = &damage.prose_before {
        writer.out.push_str(prose);
        writer.out.push('\n');
    }
    if damage.fence {
        writer.out.push_str("```json\n");
    }
    match &damage.wrapper {
        Some((key, with_sibling)) => {
            writer.out.push('{');
            if *with_sibling {
                writer.string("count");
                writer.out.push_str(&format!(": {}, ", items.len()));
            }
            writer.string(key);
            writer.out.push_str(": ");
            writer.list(&nodes, 1);
            writer.out.push('}');
        }
        None => writer.list(&nodes, 0),
    }
    if damage.fence {
        writer.out.push_str("\n```");
    }
    if let Some(prose) = &damage.prose_after {
        writer.out.push('\n');
        writer.out.push_str(prose);
    }
    let Writer {
        mut out, element_ends, ..
    } = writer;
    let mut complete = items.len();
    if let Some((fraction, note)) = &damage.cut {
        let mut at = ((out.len() as f64) * fraction) as usize;
        while !out.is_char_boundary(at) {
            at -= 1;
        }
        out.truncate(at);
        out.push_str(note);
        complete = element_ends.iter().filter(|&&end| end <= at).count();
    }
    (out, complete)
}

fn memory_id(n: u128) -> MemoryId {
    MemoryId::from_uuid(uuid::Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 | n))
}

fn message_id(n: u128) -> MessageId {
    MessageId::from_uuid(uuid::Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0100 | n))
}

fn run(raw: &str) -> ProcessOutput {
    let mut context = BTreeMap::new();
    context.insert(
        SHORT_IDS[0].to_owned(),
        (memory_id(1), "Caroline volunteers at the animal shelter.".to_owned()),
    );
    context.insert(
        SHORT_IDS[1].to_owned(),
        (memory_id(2), "Melanie plays the clarinet in a band.".to_owned()),
    );
    let turns = BTreeMap::from([
        (TURN_LABELS[0].to_owned(), message_id(1)),
        (TURN_LABELS[1].to_owned(), message_id(2)),
    ]);
    process(&ProcessInput {
        raw_text: raw,
        context,
        turns,
        ..ProcessInput::default()
    })
}

/// What became of each element: `Ok(position among the items)` or `Err(reason)`.
fn fates(output: &ProcessOutput) -> BTreeMap<usize, Result<usize, DropReason>> {
    let mut fates: BTreeMap<usize, Result<usize, DropReason>> = BTreeMap::new();
    for (position, index) in output.item_indices.iter().enumerate() {
        fates.insert(*index, Ok(position));
    }
    for drop in &output.dropped {
        fates.insert(drop.index, Err(drop.reason));
    }
    fates
}

/// The property: the damaged text's items are exactly the reference's (every field), each complete element meets
/// the fate it meets undamaged (kept, or dropped for the same reason), and nothing past them is kept.
fn check(items: &[Item], damage: &Damage) -> Result<(), TestCaseError> {
    let items: Vec<Item> = items.iter().map(|item| item.for_quotes(damage.quotes)).collect();
    let (raw, complete) = render(&items, damage);
    let damaged = run(&raw);
    // The element the cut ended inside is kept when its text closed, with what it finished saying: the whole
    // element's text, and part of its evidence. The reference then holds it too (whole), so that hints naming
    // it resolve alike; it is compared on its own and taken out of both lists.
    let mut damaged_items = damaged.items.clone();
    let salvaged_position = damaged.item_indices.iter().position(|&index| index == complete);
    let n_reference = complete + usize::from(salvaged_position.is_some());
    let reference_text = Value::Array(items[..n_reference].iter().map(Item::reference).collect()).to_string();
    let mut reference = run(&reference_text);
    if let Some(position) = salvaged_position {
        if let Some(in_reference) = reference.item_indices.iter().position(|&index| index == complete) {
            reference.items.remove(in_reference);
        }
        let salvaged = damaged_items.remove(position);
        let whole = run(&Value::Array(items.iter().map(Item::reference).collect()).to_string());
        let whole_item = whole
            .item_indices
            .iter()
            .position(|&index| index == complete)
            .map(|position| &whole.items[position]);
        prop_assert!(
            whole_item.is_some_and(|whole| whole.text == salvaged.text
                && salvaged.evidence.iter().all(|turn| whole.evidence.contains(turn))),
            "the cut element was kept as {:?}, whole it is {:?}, in {:?}",
            salvaged,
            whole_item,
            raw
        );
    }
    prop_assert_eq!(
        &damaged_items,
        &reference.items,
        "items differ for {:?}\nreference {}",
        raw,
        reference_text
    );
    let (damaged_fates, reference_fates) = (fates(&damaged), fates(&reference));
    for index in 0..complete {
        prop_assert_eq!(
            damaged_fates.get(&index),
            reference_fates.get(&index),
            "element {} of {:?}",
            index,
            raw
        );
    }
    // Past the cut element (checked above when it was kept), nothing is kept.
    let first_past = complete + usize::from(salvaged_position.is_some());
    for (index, fate) in damaged_fates.range(first_past..) {
        prop_assert!(
            fate.is_err(),
            "element {} past the complete ones was kept from {:?}",
            index,
            raw
        );
    }
    Ok(())
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z]{2,9}",
        2 => "[A-Z][a-z]{2,8}",
        // Apostrophes inside words, straight and curly: a single-quoted text keeps them.
        2 => "[a-z]{2,6}['’][a-z]{1,3}",
        2 => prop::sample::select(&NON_ASCII_WORDS[..]).prop_map(str::to_owned),
        1 => "[0-9]{1,4}",
        1 => "\\([a-z]{2,6}\\)|[a-z]{2,5}-[a-z]{2,5}|\\[[a-z]{2,5}\\]|\\{[a-z]{2,5}\\}|[a-z]{2,5}[,;:!?]",
        1 => "\"[a-z]{2,6}\"",
    ]
}

fn text() -> impl Strategy<Value = String> {
    (prop::collection::vec(word(), 3..10), any::<bool>())
        .prop_map(|(words, period)| format!("{}{}", words.join(" "), if period { "." } else { "" }))
}

fn item() -> impl Strategy<Value = Item> {
    let fields = (
        text(),
        0u8..=100,
        prop::option::weighted(0.3, prop::sample::select(&DATES[..])),
        prop::option::weighted(0.2, prop::sample::select(&DATES[..])),
        any::<bool>(),
        prop::sample::select(&TEMPORALS[..]),
        prop::option::weighted(0.2, prop::sample::select(&RELATIONSHIPS[..])),
    );
    let lists = (
        prop::collection::vec(prop::sample::select(&SHORT_IDS[..]), 0..3),
        prop::collection::vec(prop::sample::select(&SHORT_IDS[..]), 0..2),
        prop::collection::vec(0u64..8, 0..3),
        prop::collection::vec((word(), prop::sample::select(&ENTITY_KINDS[..])), 0..3),
        prop::collection::vec(prop::sample::select(&TURN_LABELS[..]), 0..3),
        any::<u16>(),
    );
    (fields, lists).prop_map(
        |(
            (text, confidence, happens_at, expires_at, sensitive, temporal, relationship_type),
            (related, consolidates, linking_hints, entities, evidence, compact),
        )| Item {
            text,
            confidence,
            happens_at,
            expires_at,
            sensitive,
            temporal,
            relationship_type,
            related,
            consolidates,
            linking_hints,
            entities,
            evidence,
            compact,
        },
    )
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    prop::collection::vec(item(), 0..7)
}

/// A note after a cut: one of [`NOTES`], or any text without a closing brace (a brace could close the cut item,
/// and then no reader could tell it from a complete one).
fn note() -> impl Strategy<Value = String> {
    prop_oneof![prop::sample::select(&NOTES[..]).prop_map(str::to_owned), "[^}]{0,40}",]
}

fn cut() -> impl Strategy<Value = Option<(f64, String)>> {
    (0.0f64..=1.0, note()).prop_map(Some)
}

fn prose(choices: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop::sample::select(choices).prop_map(|prose| Some(prose.to_owned()))
}

fn wrapper() -> impl Strategy<Value = Option<(String, bool)>> {
    (
        prop_oneof![
            "memories|items|results|data|facts|output".prop_map(String::from),
            "[a-z_]{1,12}"
        ],
        any::<bool>(),
    )
        .prop_filter("a `text` key makes the object one memory", |(key, _)| key != "text")
        .prop_map(Some)
}

fn quotes() -> impl Strategy<Value = Quotes> {
    prop_oneof![Just(Quotes::Double), Just(Quotes::Single), Just(Quotes::Smart)]
}

/// Every damage at once, each present or not.
fn any_damage() -> impl Strategy<Value = Damage> {
    let syntax = (quotes(), any::<[bool; 5]>());
    let wrapping = (
        any::<bool>(),
        prop::option::of(wrapper()),
        any::<bool>(),
        prop::option::of(prose(&PROSE_BEFORE)),
        prop::option::of(prose(&PROSE_AFTER)),
        prop::option::of(cut()),
    );
    (syntax, wrapping).prop_map(
        |((quotes, [python_literals, comments, trailing_commas, pretty, escape_non_ascii]), wrapping)| {
            let (byte_order_mark, wrapper, fence, prose_before, prose_after, cut) = wrapping;
            Damage {
                quotes,
                python_literals,
                comments,
                trailing_commas,
                pretty,
                escape_non_ascii,
                byte_order_mark,
                wrapper: wrapper.flatten(),
                fence,
                prose_before: prose_before.flatten(),
                prose_after: prose_after.flatten(),
                cut: cut.flatten(),
            }
        },
    )
}

/// Cases per property: 256, or `PROPTEST_CASES` for a longer run.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), .. ProptestConfig::default() })]

    #[test]
    fn cut_at_any_byte_then_any_note(items in items(), cut in cut()) {
        check(&items, &Damage { cut, ..Damage::default() })?;
    }

    #[test]
    fn prose_before_and_after(items in items(), before in prose(&PROSE_BEFORE), after in prose(&PROSE_AFTER)) {
        check(&items, &Damage { prose_before: before, prose_after: after, ..Damage::default() })?;
    }

    #[test]
    fn fenced_with_prose_around(items in items(), before in prose(&PROSE_BEFORE), after in prose(&PROSE_AFTER)) {
        check(&items, &Damage { fence: true, prose_before: before, prose_after: after, ..Damage::default() })?;
    }

    #[test]
    fn single_quotes_with_apostrophes_inside(items in items()) {
        check(&items, &Damage { quotes: Quotes::Single, ..Damage::default() })?;
    }

    #[test]
    fn python_literals(items in items()) {
        check(&items, &Damage { quotes: Quotes::Single, python_literals: true, ..Damage::default() })?;
    }

    #[test]
    fn wrapped_in_an_object_under_any_key(items in items(), wrapper in wrapper()) {
        check(&items, &Damage { wrapper, ..Damage::default() })?;
    }

    #[test]
    fn line_and_block_comments(items in items(), pretty in any::<bool>()) {
        check(&items, &Damage { comments: true, pretty, ..Damage::default() })?;
    }

    #[test]
    fn a_byte_order_mark(items in items()) {
        check(&items, &Damage { byte_order_mark: true, ..Damage::default() })?;
    }

    #[test]
    fn smart_quotes(items in items()) {
        check(&items, &Damage { quotes: Quotes::Smart, ..Damage::default() })?;
    }

    #[test]
    fn trailing_commas(items in items(), pretty in any::<bool>()) {
        check(&items, &Damage { trailing_commas: true, pretty, ..Damage::default() })?;
    }

    #[test]
    fn non_ascii_text_raw_or_escaped(items in items(), escape_non_ascii in any::<bool>()) {
        check(&items, &Damage { escape_non_ascii, ..Damage::default() })?;
    }

    #[test]
    fn every_damage_at_once(items in items(), damage in any_damage()) {
        check(&items, &damage)?;
    }

    #[test]
    fn the_undamaged_writer_writes_what_serde_json_reads(items in items(), pretty in any::<bool>()) {
        // The property compares against serde_json's writing; this checks the test's own writer against it.
        let (raw, complete) = render(&items, &Damage { pretty, ..Damage::default() });
        let read: Value = serde_json::from_str(&raw).map_err(|error| TestCaseError::fail(error.to_string()))?;
        let compact_reference: Vec<Value> = items.iter().map(|item| node_to_json(&item.node())).collect();
        prop_assert_eq!(read, Value::Array(compact_reference));
        prop_assert_eq!(complete, items.len());
    }
}

/// The shape seen in production, spelled out: cut inside a key of the last element, then the model's note (the
/// previous parser read all of it as unparseable).
#[test]
fn a_response_cut_inside_an_element_and_followed_by_a_note_keeps_the_elements_before() {
    let raw = "[{\"text\": \"Caroline moved to Boston in May.\", \"confidence\": 0.9, \"evidence_turns\": [\"t1\"]}, \
               {\"text\": \"Caroline adopted a second dog named Max.\", \"confide\n\n(output truncated)";
    let output = run(raw);
    let kept: Vec<&str> = output.items.iter().map(|item| item.text.as_str()).collect();
    assert_eq!(kept, ["Caroline moved to Boston in May."]);
    // Its text closed, so it is read as far as it got: no turn cited before the cut.
    assert_eq!(output.count_dropped(DropReason::Truncated), 0);
    assert_eq!(output.count_dropped(DropReason::MissingEvidence), 1);
    assert!(!output.unparseable);
}
