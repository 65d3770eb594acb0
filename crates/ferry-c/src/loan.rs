//! `ferry_loan`: room for a message, written in place then sent.

use crate::status::{Failure, Result, send_failure};

/// Room for one message of a fixed length, lent by ferry (a block of the
/// link's shared memory for a large one, which the receiver then reads in
/// place): write it through `ferry_loan_data`, then `ferry_loan_commit`
/// sends it or `ferry_loan_abort` drops it; either frees the loan.
#[allow(non_camel_case_types)]
pub struct ferry_loan {
    loan: ferry::Loan<'static>,
    /// Where the caller writes: the loan's bytes, which do not move while
    /// the loan lives (it is boxed behind the handle).
    data: *mut u8,
}

impl ferry_loan {
    pub(crate) fn new(tx: &ferry::Sender, len: usize) -> Result<Self> {
        let mut loan = tx.loan_owned(len).map_err(|e| send_failure(e.into()))?;
        let data = loan.as_mut_ptr();
        Ok(Self { loan, data })
    }

    pub(crate) fn data(&self) -> *mut u8 {
        self.data
    }

    pub(crate) fn len(&self) -> usize {
        self.loan.len()
    }

    /// Sends what was written.
    pub(crate) fn commit(self) -> Result<()> {
        self.loan
            .send()
            .map_err(|e| -> Failure { send_failure(e.into()) })
    }
}
