"""One document through the pipeline: render its pages, route each (text layer, blank or
engine), read them, checkpoint, and assemble the document for the sinks."""
