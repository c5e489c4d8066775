// Package tableitem reads the record table's items where no store does:
// the images of its stream, as Lambda delivers them, and the size of an
// item by DynamoDB's rules (what a record costs to write and read).
package tableitem
