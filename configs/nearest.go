package configs

// EditDistance is the optimal string alignment distance of a and b (see
// editDistance): the measure config check also uses to name the root file
// a misspelt host file meant.
func EditDistance(a, b string) int { return editDistance(a, b) }
