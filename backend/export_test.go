package backend

// Users is users, for the external tests.
func (h *Handler) Users() int { return h.users() }
