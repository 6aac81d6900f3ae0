package wire

// QTTableSize is the size of the QT table m's encoding carries, for the
// test that stamps sharing a QT share its entry.
func QTTableSize(m Message) (int, error) {
	w, err := messageToWire(m)
	if err != nil {
		return 0, err
	}
	return len(w.QTs), nil
}
