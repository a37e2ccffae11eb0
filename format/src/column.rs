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
}

impl ColumnKind {
    pub fn from_tag(tag: u8) -> Option<Self> {
        Some(match tag {
            0 => ColumnKind::Timestamp,
            1 => ColumnKind::Int,
            2 => ColumnKind::Float64,
            3 => ColumnKind::Float32,
            4 => ColumnKind::Bool,
            5 => ColumnKind::Bytes,
            _ => return None,
        })
    }
}

/// Many byte strings in one buffer: one allocation per column, not per value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ByteValues {
    offsets: Vec<u32>,
    data: Vec<u8>,
}

impl ByteValues {
    pub fn from_parts(offsets: Vec<u32>, data: Vec<u8>) -> Self {
        debug_assert!(offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]));
        ByteValues { offsets, data }
    }

    pub fn push(&mut self, v: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(v);
        self.offsets.push(self.data.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len() {
            return None;
        }
        Some(&self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i).expect("in range"))
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    pub fn byte_len(&self) -> usize {
        self.data.len()
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
            ColumnKind::Bytes => Values::Bytes(ByteValues::default()),
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

    /// Bytes this column holds in memory, for the bucket size limit.
    pub fn approx_bytes(&self) -> usize {
        match &self.values {
            Values::Int(v) => v.len() * 8,
            Values::Float(v) => v.len() * 8,
            Values::Bool(v) => v.len(),
            Values::Bytes(v) => v.byte_len() + v.len() * 4,
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
