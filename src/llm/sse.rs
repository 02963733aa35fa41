//! Server-sent events as OpenAI-compatible servers send them: `data: {json}` lines separated by
//! blank lines, ending with `data: [DONE]`.

/// Incremental SSE decoder: feed bytes, take complete `data` payloads.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    data: Vec<String>,
}

/// What one complete event carried.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent {
    Data(String),
    Done,
}

impl SseDecoder {
    /// Adds bytes and returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(pos) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                self.dispatch(&mut events);
            } else if let Some(rest) = line.strip_prefix("data:") {
                self.data
                    .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
            }
            // Comments (":"), "event:", "id:", "retry:" carry nothing we use.
        }
        events
    }

    /// Flushes a last event not followed by a blank line (some servers end that way).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            events.extend(self.feed_line_end(&rest));
        }
        self.dispatch(&mut events);
        events
    }

    fn feed_line_end(&mut self, rest: &[u8]) -> Vec<SseEvent> {
        let mut bytes = rest.to_vec();
        bytes.push(b'\n');
        self.feed(&bytes)
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        if self.data.is_empty() {
            return;
        }
        let payload = std::mem::take(&mut self.data).join("\n");
        if payload.trim() == "[DONE]" {
            events.push(SseEvent::Done);
        } else {
            events.push(SseEvent::Data(payload));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_events_across_arbitrary_chunks() {
        let stream =
            b"data: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: {\"b\":\ndata: 2}\n\ndata: [DONE]\n\n";
        for cut in 1..stream.len() {
            let mut d = SseDecoder::default();
            let mut events = d.feed(&stream[..cut]);
            events.extend(d.feed(&stream[cut..]));
            events.extend(d.finish());
            assert_eq!(
                events,
                vec![
                    SseEvent::Data("{\"a\":1}".into()),
                    SseEvent::Data("{\"b\":\n2}".into()),
                    SseEvent::Done
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn last_event_without_blank_line() {
        let mut d = SseDecoder::default();
        let mut events = d.feed(b"data: x");
        events.extend(d.finish());
        assert_eq!(events, vec![SseEvent::Data("x".into())]);
    }
}
