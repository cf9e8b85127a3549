"""A slow reader's fate: the view of a stream, its writer, the judge that cuts it, the
pacer and the TCP probe."""
