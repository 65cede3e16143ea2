"""What a person looks at: the Graphviz drawing (`render`), the HTML report (`report`) and an
item's decision tree (`explain`)."""
