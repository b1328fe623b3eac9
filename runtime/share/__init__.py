"""Share-group state persistence (Kafka's share coordinator): records, batch merging and the
ShareCoordinatorShard that serves Initialize/Read/Write/Delete share-group state."""
