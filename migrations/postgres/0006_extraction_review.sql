-- The optional extraction reviewer: when it planned a review of this memory (NULL: not yet).
ALTER TABLE memories ADD COLUMN reviewed_at TIMESTAMPTZ;
