//! The in-memory shape of one decoded column: dense values (one slot per row,
//! a placeholder where the row is NULL) plus an optional validity map.

/// How a column's values are stored. The Postgres layer maps each SQL type to
/// one of these; the format does not know SQL types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ColumnKind {
    /// Timestamps in microseconds; delta-of-delta is usually the winner.
    Timestamp = 0,
    /// By-value integers of 1, 2, 4 or 8 bytes (int, date, oid, enum, ...).
    Int = 1,
    Float64 = 2,
    Float32 = 3,
    Bool = 4,
    /// Any other type, as its raw bytes.
    Bytes = 5,
    /// jsonb, as its datum's bytes in memory; stored shredded by path
    /// (`codec::document`). Format version 3; older buckets hold jsonb as Bytes.
    Document = 6,
}

impl ColumnKind {
    /// Kinds stored as numbers, whose order and sum are the SQL type's: bucket
    /// headers keep their min/max, NULL count and sum (`stats::column_stats`).
    pub fn summarised(self) -> bool {
        matches!(self, ColumnKind::Timestamp | ColumnKind::Int | ColumnKind::Float64 | ColumnKind::Float32)
    }

    /// Whether a column stored as `stored` reads as this kind: the same kind,
    /// or jsonb kept as Bytes before format version 3.
    pub fn reads(self, stored: ColumnKind) -> bool {
        self == stored || (self == ColumnKind::Document && stored == ColumnKind::Bytes)
    }

    pub fn from_tag(tag: u8) -> Option<Self> {
        Some(match tag {
            0 => ColumnKind::Timestamp,
            1 => ColumnKind::Int,
            2 => ColumnKind::Float64,
            3 => ColumnKind::Float32,
            4 => ColumnKind::Bool,
            5 => ColumnKind::Bytes,
            6 => ColumnKind::Document,
            _ => return None,
        })
    }
}

/// Many byte strings in one buffer: one allocation per column, not per value.
///
/// A dictionary-encoded column decodes to its distinct values plus one code
/// per row, not expanded: a bucket's tags are one value repeated, and copying
/// it once per row cost more than the rest of a wide scan's decoding.
#[derive(Clone, Debug, Default)]
pub struct ByteValues {
    offsets: Vec<u32>,
    data: Vec<u8>,
    /// Dictionary form: row `i` holds entry `codes[i]` of `offsets`/`data`.
    codes: Option<Vec<u32>>,
}

impl PartialEq for ByteValues {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ByteValues {}

impl ByteValues {
    pub fn from_parts(offsets: Vec<u32>, data: Vec<u8>) -> Self {
        debug_assert!(offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]));
        ByteValues { offsets, data, codes: None }
    }

    /// Rows given as codes into `entries` (a plain ByteValues); `None` when a
    /// code is out of range.
    pub fn from_dictionary(entries: ByteValues, codes: Vec<u32>) -> Option<Self> {
        debug_assert!(entries.codes.is_none(), "dictionary entries are plain");
        let n = entries.entry_count() as u32;
        codes.iter().all(|&c| c < n).then_some(ByteValues { codes: Some(codes), ..entries })
    }

    pub fn push(&mut self, v: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(v);
        self.offsets.push(self.data.len() as u32);
        let entry = self.entry_count() as u32 - 1;
        if let Some(codes) = &mut self.codes {
            codes.push(entry);
        }
    }

    fn entry_count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    fn entry(&self, i: usize) -> &[u8] {
        &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    pub fn len(&self) -> usize {
        match &self.codes {
            Some(codes) => codes.len(),
            None => self.entry_count(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match &self.codes {
            Some(codes) => codes.get(i).map(|&c| self.entry(c as usize)),
            None if i < self.entry_count() => Some(self.entry(i)),
            None => None,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + Clone {
        (0..self.len()).map(|i| self.get(i).expect("in range"))
    }

    /// In dictionary form: the distinct values and each row's code into them.
    pub fn dictionary(&self) -> Option<(impl Iterator<Item = &[u8]> + Clone, &[u32])> {
        let codes = self.codes.as_deref()?;
        Some(((0..self.entry_count()).map(|i| self.entry(i)), codes))
    }

    /// Every row's bytes, concatenated.
    pub fn concatenated(&self) -> std::borrow::Cow<'_, [u8]> {
        match self.codes {
            None => std::borrow::Cow::Borrowed(&self.data),
            Some(_) => std::borrow::Cow::Owned(self.iter().flatten().copied().collect()),
        }
    }

    /// The present values spread over all rows, an empty placeholder where
    /// `valid` is false; the dictionary form stays one.
    pub fn spread(self, valid: &[bool]) -> ByteValues {
        match self {
            ByteValues { offsets, data, codes: Some(codes) } => {
                let mut out = ByteValues { offsets, data, codes: None };
                out.push(&[]);
                let placeholder = out.entry_count() as u32 - 1;
                let mut it = codes.iter();
                out.codes = Some(valid.iter().map(|&p| if p { *it.next().expect("counted") } else { placeholder }).collect());
                out
            }
            plain => {
                let mut out = ByteValues::default();
                let mut it = plain.iter();
                for &p in valid {
                    out.push(if p { it.next().expect("counted") } else { &[] });
                }
                out
            }
        }
    }

    /// The bytes held in memory (values, offsets and codes).
    pub fn byte_len(&self) -> usize {
        self.data.len() + self.offsets.len() * 4 + self.codes.as_ref().map_or(0, |c| c.len() * 4)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Timestamp and Int kinds.
    Int(Vec<i64>),
    /// Float64 and Float32 kinds (f32 widened losslessly).
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Bytes(ByteValues),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Bytes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty vector of the representation `kind` uses.
    pub fn empty_for(kind: ColumnKind) -> Values {
        match kind {
            ColumnKind::Timestamp | ColumnKind::Int => Values::Int(Vec::new()),
            ColumnKind::Float64 | ColumnKind::Float32 => Values::Float(Vec::new()),
            ColumnKind::Bool => Values::Bool(Vec::new()),
            ColumnKind::Bytes | ColumnKind::Document => Values::Bytes(ByteValues::default()),
        }
    }

    fn push_placeholder(&mut self) {
        match self {
            Values::Int(v) => v.push(0),
            Values::Float(v) => v.push(0.0),
            Values::Bool(v) => v.push(false),
            Values::Bytes(v) => v.push(&[]),
        }
    }
}

/// One column of a bucket, dense: `values.len()` equals the row count.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub attnum: u16,
    pub kind: ColumnKind,
    /// `None` when no row is NULL; otherwise `true` where the row has a value.
    pub validity: Option<Vec<bool>>,
    pub values: Values,
}

impl Column {
    pub fn new(attnum: u16, kind: ColumnKind) -> Self {
        Column { attnum, kind, validity: None, values: Values::empty_for(kind) }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_null(&self, row: usize) -> bool {
        self.validity.as_ref().is_some_and(|v| !v[row])
    }

    pub fn push_null(&mut self) {
        let rows = self.len();
        self.validity.get_or_insert_with(|| vec![true; rows]).push(false);
        self.values.push_placeholder();
    }

    fn mark_valid(&mut self) {
        if let Some(v) = self.validity.as_mut() {
            v.push(true);
        }
    }

    pub fn push_int(&mut self, x: i64) {
        self.mark_valid();
        match &mut self.values {
            Values::Int(v) => v.push(x),
            _ => panic!("push_int on a {:?} column", self.kind),
        }
    }

    pub fn push_float(&mut self, x: f64) {
        self.mark_valid();
        match &mut self.values {
            Values::Float(v) => v.push(x),
            _ => panic!("push_float on a {:?} column", self.kind),
        }
    }

    pub fn push_bool(&mut self, x: bool) {
        self.mark_valid();
        match &mut self.values {
            Values::Bool(v) => v.push(x),
            _ => panic!("push_bool on a {:?} column", self.kind),
        }
    }

    pub fn push_bytes(&mut self, x: &[u8]) {
        self.mark_valid();
        match &mut self.values {
            Values::Bytes(v) => v.push(x),
            _ => panic!("push_bytes on a {:?} column", self.kind),
        }
    }

    /// Bytes this column holds in memory (EXPLAIN's Bytes Decompressed).
    pub fn approx_bytes(&self) -> usize {
        match &self.values {
            Values::Int(v) => v.len() * 8,
            Values::Float(v) => v.len() * 8,
            Values::Bool(v) => v.len(),
            Values::Bytes(v) => v.byte_len(),
        }
    }

    /// A copy holding only the rows where `keep` is true.
    pub fn filter(&self, keep: &[bool]) -> Column {
        let rows: Vec<usize> = keep.iter().enumerate().filter(|(_, k)| **k).map(|(i, _)| i).collect();
        self.gather(&rows)
    }

    /// A copy holding rows `rows` of this column, in that order.
    pub fn gather(&self, rows: &[usize]) -> Column {
        let mut out = Column::new(self.attnum, self.kind);
        for &row in rows {
            out.push_row_of(self, row);
        }
        out
    }

    /// Appends row `row` of `other` (a column of the same kind).
    pub fn push_row_of(&mut self, other: &Column, row: usize) {
        assert_eq!(self.kind, other.kind, "rows move only between columns of one kind");
        if other.is_null(row) {
            self.push_null();
            return;
        }
        match &other.values {
            Values::Int(v) => self.push_int(v[row]),
            Values::Float(v) => self.push_float(v[row]),
            Values::Bool(v) => self.push_bool(v[row]),
            Values::Bytes(v) => self.push_bytes(v.get(row).expect("in range")),
        }
    }
}
