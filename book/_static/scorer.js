// Search ranking (Sphinx's html_search_scorer): pages whose title or text matches come before API
// entries; a reader searching "rebasin" wants chapter 5 first, then symlib.symmetry.rebasin.
var Scorer = {
  objNameMatch: 3,
  objPartialMatch: 1,
  objPrio: { 0: 2, 1: 1, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
